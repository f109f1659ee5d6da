"""A turn's scope names the reply it stored and carries the turn's outcome into its metadata."""

from __future__ import annotations

import pytest
from django.db import transaction

from advisors_app.core import AssistantMessage
from advisors_app.models import ChatMessage
from advisors_app.stores.memory import DjangoChatMemoryRepository
from tests.core.memory.messages import T, U, call

pytestmark = pytest.mark.django_db(transaction=True)


def held(*batches: list) -> tuple[DjangoChatMemoryRepository, object]:
    repository = DjangoChatMemoryRepository()
    scope = repository.open_turn("c1", conversation_pk=None, last_sequence=0)
    with repository.scoped(scope):
        for batch in batches:
            repository.append("c1", batch)
    return repository, scope


def test_the_stored_reply_id_comes_from_the_rows_written() -> None:
    repository, scope = held([U("hi"), AssistantMessage("hello")])
    assert scope.reply_id() is None  # nothing written yet
    with transaction.atomic():
        repository.write_turn(scope)
    assert scope.reply_id() == ChatMessage.objects.get(text="hello").pk


def test_a_tool_round_gives_the_final_reply_and_only_it_is_annotated() -> None:
    tool_call = call("c1")
    repository, scope = held([U("weather?"), tool_call, T("c1"), AssistantMessage("Sunny.")])
    scope.annotate_reply({"trace_id": "t1", "version": 3})
    with transaction.atomic():
        repository.write_turn(scope)
    reply = ChatMessage.objects.get(text="Sunny.")
    assert scope.reply_id() == reply.pk
    assert reply.metadata == {"trace_id": "t1", "version": 3}
    assert ChatMessage.objects.get(message_type="assistant", text="").metadata == {}


def test_a_turn_without_a_reply_names_none() -> None:
    repository, scope = held([U("hi")])
    scope.annotate_reply({"trace_id": "t1"})  # nothing to annotate
    with transaction.atomic():
        repository.write_turn(scope)
    assert scope.reply_id() is None
    assert ChatMessage.objects.get().metadata == {}
