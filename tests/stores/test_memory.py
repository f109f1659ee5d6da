"""DjangoChatMemoryRepository on the embedded PostgreSQL: concurrency, ordering, advisors.

The contract itself is tested for every backend in tests/core/memory/test_repository_contract.py.
"""

from __future__ import annotations

import asyncio
import threading
from contextlib import aclosing
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from advisors_app.core import (
    CONVERSATION_ID,
    ChatClient,
    ProviderUnavailableError,
    ScriptedChatModel,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor, PromptChatMemoryAdvisor
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.models import ChatMessage, Conversation
from advisors_app.stores.memory import DjangoChatMemoryRepository
from tests.core.advisors.memory_helpers import turn
from tests.core.memory.messages import A, S, T, U, call

pytestmark = pytest.mark.django_db(transaction=True)


def stored_rows(conversation_id):
    return list(
        ChatMessage.objects.filter(conversation__conversation_id=conversation_id)
        .order_by("sequence")
        .values_list("sequence", "message_type", "text")
    )


def test_concurrent_appends_to_one_new_conversation_never_interleave():
    repository = DjangoChatMemoryRepository()
    threads, turns = 6, 12
    barrier = threading.Barrier(threads)
    errors = []

    def worker(t):
        try:
            barrier.wait()
            for i in range(turns):
                repository.append("shared", [U(f"{t}:{i}"), call(f"c{t}{i}"), A(f"{t}:{i}")])
        except Exception as exc:  # reported below; a thread cannot fail the test itself
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert errors == []
    rows = stored_rows("shared")
    total = threads * turns * 3
    assert [r[0] for r in rows] == list(range(1, total + 1))
    for user, tool_call, reply in zip(rows[::3], rows[1::3], rows[2::3], strict=True):
        assert (user[1], tool_call[1], reply[1]) == ("user", "assistant", "assistant")
        assert user[2] == reply[2]
    for t in range(threads):
        mine = [int(r[2].split(":")[1]) for r in rows[::3] if r[2].startswith(f"{t}:")]
        assert mine == list(range(turns))
    assert Conversation.objects.get(conversation_id="shared").last_sequence == total


async def test_concurrent_turns_through_the_advisor_are_both_stored_whole():
    async def slow(prompt):
        await asyncio.sleep(0.2)
        return "slow answer"

    async def fast(prompt):
        await asyncio.sleep(0.01)
        return "fast answer"

    memory = MessageWindowChatMemory(DjangoChatMemoryRepository())
    model = ScriptedChatModel([slow, fast])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    first = asyncio.create_task(turn(client, "first", "call"))
    await asyncio.sleep(0.05)
    second = asyncio.create_task(turn(client, "second", "stream"))
    await asyncio.gather(first, second)
    assert await memory.aget("c1") == [U("second"), A("fast answer"), U("first"), A("slow answer")]


def test_messages_are_ordered_by_sequence_never_by_timestamp():
    repository = DjangoChatMemoryRepository()
    repository.append("c1", [U("1"), A("1"), U("2")])
    # A clock that went backwards (or another worker's clock) must not reorder the conversation.
    ChatMessage.objects.filter(sequence=1).update(created_at=timezone.now() + timedelta(days=1))
    assert repository.find_by_conversation_id("c1") == [U("1"), A("1"), U("2")]
    assert repository.find_last("c1", 2) == [A("1"), U("2")]


def test_save_all_keeps_the_conversation_row_and_delete_removes_it():
    owner = get_user_model().objects.create_user("ann")
    Conversation.objects.create(conversation_id="c1", owner=owner, title="Trip")
    repository = DjangoChatMemoryRepository()
    repository.append("c1", [S("sys"), U("1"), A("1")])
    repository.save_all("c1", [U("replaced")])
    conversation = Conversation.objects.get(conversation_id="c1")
    assert (conversation.owner, conversation.title, conversation.last_sequence) == (
        owner,
        "Trip",
        1,
    )
    assert stored_rows("c1") == [(1, "user", "replaced")]
    repository.delete_by_conversation_id("c1")
    assert not Conversation.objects.exists()
    assert not ChatMessage.objects.exists()


def test_tool_calls_and_responses_are_stored_as_json():
    repository = DjangoChatMemoryRepository()
    repository.append("c1", [U("Weather?"), call("t1"), T("t1", data="5C"), A("It is 5C")])
    rows = ChatMessage.objects.order_by("sequence")
    assert rows[1].tool_calls == [
        {"id": "t1", "name": "get_weather", "arguments": '{"city": "Oslo"}', "type": "function"}
    ]
    assert rows[2].tool_responses == [{"id": "t1", "name": "get_weather", "response_data": "5C"}]


@pytest.mark.parametrize("advisor_class", [MessageChatMemoryAdvisor, PromptChatMemoryAdvisor])
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_round_trip_through_the_database(advisor_class, mode):
    memory = MessageWindowChatMemory(DjangoChatMemoryRepository())
    model = ScriptedChatModel(["Hello", "Again?"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    await turn(client, "Hi", mode)
    await turn(client, "Once more", mode)
    assert await memory.aget("c1") == [U("Hi"), A("Hello"), U("Once more"), A("Again?")]
    assert "Hello" in "".join(m.text for m in model.prompts[1].instructions)


async def test_b06_interrupted_stream_is_stored_marked_in_the_database():
    memory = MessageWindowChatMemory(DjangoChatMemoryRepository())
    words = ["Roses", " are", " red", ",", " violets", " are", " blue"]
    model = ScriptedChatModel(
        [words, ["Partial", ProviderUnavailableError("cut")]], chunk_delay=0.05
    )
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    stream = client.prompt("Write a poem").advisor_param(CONVERSATION_ID, "c1").stream().content()
    received = [await anext(stream) for _ in range(3)]
    await asyncio.wait_for(stream.aclose(), timeout=1)
    assert "".join(received) == "Roses are red"
    with pytest.raises(ProviderUnavailableError):
        async with aclosing(
            client.prompt("Another").advisor_param(CONVERSATION_ID, "c1").stream().content()
        ) as deltas:
            [_ async for _ in deltas]
    stored = await memory.repository.afind_by_conversation_id("c1")
    assert stored == [U("Write a poem"), A("Roses are red"), U("Another"), A("Partial")]
    assert dict(stored[1].metadata) == {"interrupted": True, "finish_reason": "cancelled"}
    assert dict(stored[3].metadata) == {"interrupted": True, "finish_reason": "error"}


def test_find_last_reaches_past_deleted_messages():
    repository = DjangoChatMemoryRepository()
    repository.append("c1", [U("1"), A("1")])
    repository.append("c1", [U(f"gone {i}") for i in range(100)])
    repository.append("c1", [U("2")])
    ChatMessage.objects.filter(text__startswith="gone").delete()
    assert repository.find_last("c1", 2) == [A("1"), U("2")]
    assert repository.find_last("c1", 10) == [U("1"), A("1"), U("2")]
