"""MultiQueryExpander: template, Spring defaults, and the fixes of defect 5.6.45."""

from __future__ import annotations

import pytest

from advisors_app.core import ScriptedChatModel
from advisors_app.core.rag import MultiQueryExpander, Query


async def test_default_expansion_prepends_the_original():
    model = ScriptedChatModel(["a\nb\nc"])
    query = Query("q", context={"k": 1})
    result = await MultiQueryExpander(model).expand(query)
    assert [q.text for q in result] == ["q", "a", "b", "c"]
    assert all(q.context == {"k": 1} for q in result)
    assert model.prompts[0].user_message.text.startswith(
        "You are an expert at information retrieval and search optimization.\n"
        "Your task is to generate 3 different versions of the given query.\n"
    )
    assert model.prompts[0].user_message.text.endswith("Original query: q\n\nQuery variants:\n")


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("a\r\n\r\nb\r\n  c  \n\n", ["q", "a", "b", "c"]),
        ("1. a\n2) b\n- c\n* d", ["q", "a", "b", "c"]),
        ("a\nq\na\nb", ["q", "a", "b"]),
        ("only one", ["q", "only one"]),
        ("   ", ["q"]),
    ],
)
async def test_blank_lines_markers_duplicates_and_counts(answer, expected):
    result = await MultiQueryExpander(ScriptedChatModel([answer])).expand(Query("q"))
    assert [q.text for q in result] == expected


async def test_without_original_and_validation():
    expander = MultiQueryExpander(
        ScriptedChatModel(["x\ny"]), include_original=False, number_of_queries=2
    )
    assert [q.text for q in await expander.expand(Query("q"))] == ["x", "y"]
    with pytest.raises(ValueError, match=r"numberOfQueries must be greater than 0"):
        MultiQueryExpander(ScriptedChatModel([]), number_of_queries=0)
    with pytest.raises(ValueError, match=r"placeholders must be present.*number"):
        MultiQueryExpander(ScriptedChatModel([]), prompt_template="{query} number")
