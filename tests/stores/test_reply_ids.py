"""The Django repository hands a turn the id of the reply it stored with the turn's trace id."""

from __future__ import annotations

import pytest

from advisors_app.core import AssistantMessage
from advisors_app.models import ChatMessage
from advisors_app.stores.memory import DjangoChatMemoryRepository, _StoredReplies
from tests.core.memory.messages import T, U, call

pytestmark = pytest.mark.django_db(transaction=True)


def traced(text: str, trace_id: str, **metadata: object) -> AssistantMessage:
    return AssistantMessage(text, {"trace_id": trace_id, **metadata})


def test_the_stored_reply_id_is_handed_out_once() -> None:
    repository = DjangoChatMemoryRepository()
    repository.append("c1", [U("hi"), traced("hello", "t1")])
    reply = ChatMessage.objects.get(text="hello")
    # Any instance: the memory advisors' repository and the service's are not the same object.
    assert DjangoChatMemoryRepository().take_reply_id("t1") == reply.pk
    assert repository.take_reply_id("t1") is None


def test_a_tool_round_stored_at_once_gives_the_final_reply() -> None:
    repository = DjangoChatMemoryRepository()
    tool_call = call("c1")
    tool_call = AssistantMessage("", {"trace_id": "t1"}, tool_call.tool_calls)
    repository.append("c1", [U("weather?"), tool_call, T("c1"), traced("Sunny.", "t1")])
    assert repository.take_reply_id("t1") == ChatMessage.objects.get(text="Sunny.").pk


def test_replies_without_a_trace_id_and_other_messages_leave_nothing() -> None:
    repository = DjangoChatMemoryRepository()
    repository.append("c1", [U("hi"), AssistantMessage("hello")])
    repository.append("c1", [AssistantMessage("again", {"trace_id": 7})])  # not a trace id
    assert repository.take_reply_id("7") is None
    assert not _StoredReplies().take("t1")


def test_ids_nobody_takes_are_dropped_oldest_first() -> None:
    replies = _StoredReplies(limit=2)
    rows = [
        ChatMessage(pk=i, message_type="assistant", metadata={"trace_id": f"t{i}"})
        for i in (1, 2, 3)
    ]
    replies.record(rows)
    assert [replies.take(f"t{i}") for i in (1, 2, 3)] == [None, 2, 3]
