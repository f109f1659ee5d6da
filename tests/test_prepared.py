"""``PreparedQuery``: compiled once, run with new values, columns converted as the ORM does."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DataError, connection, transaction
from django.db.models import IntegerField, Q, Value
from django.db.models.functions import Cast

from advisors_app.db.prepared import PreparedQuery, rows_together
from advisors_app.models import ChatMessage, Conversation

pytestmark = pytest.mark.django_db


def window(conversation: int, low: int) -> list[tuple]:
    rows = (
        ChatMessage.objects.filter(conversation_id=conversation)
        .filter(Q(message_type="system") | Q(sequence__gt=low))
        .order_by("sequence")
        .values_list("sequence", "text", "metadata")
    )
    return list(rows)


def test_rows_match_the_orm_for_any_values_and_json_is_decoded() -> None:
    conversation = Conversation.objects.create(conversation_id="c1")
    for sequence, kind in enumerate(["system", "user", "assistant", "user"], start=1):
        ChatMessage.objects.create(
            conversation=conversation,
            sequence=sequence,
            message_type=kind,
            text=f"m{sequence}",
            metadata={"n": sequence},
        )
    prepared = PreparedQuery(
        lambda conversation, low: (
            ChatMessage.objects.filter(conversation_id=conversation)
            .filter(Q(message_type="system") | Q(sequence__gt=low))
            .order_by("sequence")
            .values_list("sequence", "text", "metadata")
        ),
        conversation=2_000_000_001,
        low=2_000_000_002,
    )
    for low in (0, 2, 3, 10):
        assert prepared.rows(conversation=conversation.pk, low=low) == window(conversation.pk, low)
    assert prepared.rows(conversation=conversation.pk, low=2)[1] == (3, "m3", {"n": 3})
    assert prepared.rows(conversation=conversation.pk + 1, low=0) == []


def test_a_placeholder_missing_from_the_compiled_query_is_refused() -> None:
    # As when the ORM folds a lookup away (an integer outside the field's range).
    prepared = PreparedQuery(lambda low: ChatMessage.objects.values_list("text"), low=7)
    with pytest.raises(ValueError, match="placeholders not found in the query: \\['low'\\]"):
        prepared.rows(low=1)


def _by_key() -> PreparedQuery:
    return PreparedQuery(
        lambda key: Conversation.objects.filter(conversation_id=key).values_list("pk", "title"),
        key="\x00key",
    )


def test_rows_together_reads_each_query_as_alone_in_one_pipeline() -> None:
    one = Conversation.objects.create(conversation_id="c1", title="One")
    two = Conversation.objects.create(conversation_id="c2", title="Two")
    by_key = _by_key()
    pipelines: list[object | None] = []

    def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        pipelines.append(getattr(context["connection"].connection, "_pipeline", None))
        return execute(sql, params, many, context)

    with connection.execute_wrapper(watch):
        rows = rows_together(
            (by_key, {"key": "c1"}), (by_key, {"key": "none"}), (by_key, {"key": "c2"})
        )
    assert rows == [[(one.pk, "One")], [], [(two.pk, "Two")]]
    assert rows == [by_key.rows(key=key) for key in ("c1", "none", "c2")]
    # Sent together: one pipeline open around all three.
    assert len(pipelines) == 3 and pipelines[0] is not None
    assert all(pipeline is pipelines[0] for pipeline in pipelines)


def test_a_query_failing_in_the_pipeline_is_the_orms_database_error() -> None:
    Conversation.objects.create(conversation_id="c1")
    as_number = PreparedQuery(
        lambda text: Conversation.objects.annotate(n=Cast(Value(text), IntegerField())).values_list(
            "n"
        ),
        text="\x00text",
    )
    with pytest.raises(DataError), transaction.atomic():
        rows_together((_by_key(), {"key": "c1"}), (as_number, {"text": "not a number"}))
    assert rows_together((as_number, {"text": "12"}), (_by_key(), {"key": "c1"}))[0] == [(12,)]
