"""``PreparedQuery``: compiled once, run with new values, columns converted as the ORM does."""

from __future__ import annotations

import pytest
from django.db.models import Q

from advisors_app.models import ChatMessage, Conversation
from advisors_app.prepared import PreparedQuery

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
