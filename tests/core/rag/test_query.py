"""Query: validation, equality, hashing, mutation."""

from __future__ import annotations

import pytest

from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.core.rag import Query


def test_blank_text_is_refused_with_springs_message():
    for text in ("", "  ", None):
        with pytest.raises(ValueError, match=r"text cannot be null or empty"):
            Query(text)
    with pytest.raises(ValueError, match=r"history cannot contain null elements"):
        Query("q", [None])


def test_equality_hash_and_mutate():
    history = [UserMessage("a"), AssistantMessage("b")]
    query = Query("q", history, {"k": 1})
    assert query == Query("q", tuple(history), {"k": 1})
    assert query != Query("q", history, {"k": 2})
    assert hash(query) == hash(Query("q", history))
    changed = query.mutate(text="r")
    assert changed.text == "r" and changed.history == query.history and changed.context == {"k": 1}
    assert {query: 1}[Query("q", history, {"k": 1})] == 1
