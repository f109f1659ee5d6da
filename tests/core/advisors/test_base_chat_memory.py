"""Turn storage shared by both memory advisors, in call and stream mode.

Bug cases B01 (what input is stored), B04 (conversation ids), B05 (streamed replies stored once,
with or without a finish reason), B06 (interrupted streams), and seed defect #7 (a failed model
call leaves nothing half-done).
"""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    AssistantMessage,
    ChatClient,
    ChatGenerationMetadata,
    ChatResponse,
    Generation,
    MemoryAdvisor,
    ProviderUnavailableError,
    ScriptedChatModel,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor, PromptChatMemoryAdvisor
from advisors_app.core.memory import MessageWindowChatMemory
from tests.core.advisors.memory_helpers import CountingRepository, turn
from tests.core.memory.messages import A, S, T, U, call

ADVISORS = [MessageChatMemoryAdvisor, PromptChatMemoryAdvisor]
MODES = ["call", "stream"]


@pytest.fixture(params=ADVISORS, ids=lambda c: c.__name__)
def advisor_class(request):
    return request.param


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


@pytest.fixture
def repository():
    return CountingRepository()


@pytest.fixture
def memory(repository):
    return MessageWindowChatMemory(repository)


def stop(text):
    return ChatResponse((Generation(AssistantMessage(text), ChatGenerationMetadata("STOP")),))


def test_markers_name_and_default_order(advisor_class, memory):
    advisor = advisor_class(memory)
    assert isinstance(advisor, MemoryAdvisor)
    assert advisor.name == advisor_class.__name__
    assert advisor.order == DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER
    assert advisor_class(memory, order=7).order == 7
    with pytest.raises(ValueError, match=r"^chatMemory cannot be null$"):
        advisor_class(None)


async def test_a_turn_is_stored_whole_in_one_append(advisor_class, mode, memory, repository):
    model = ScriptedChatModel(["Hello", "Again?"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    assert await turn(client, "Hi", mode) == "Hello"
    assert await turn(client, "Once more", mode) == "Again?"
    assert memory.get("c1") == [U("Hi"), A("Hello"), U("Once more"), A("Again?")]
    assert repository.appends == [[U("Hi"), A("Hello")], [U("Once more"), A("Again?")]]


@pytest.mark.parametrize("finish_reason", [True, False], ids=["finish-reason", "none"])
async def test_b05_streamed_reply_is_stored_once_from_the_aggregate(
    advisor_class, memory, repository, finish_reason
):
    chunks = ["Red", ", green", ", blue", *([stop("")] if finish_reason else [])]
    model = ScriptedChatModel([chunks, ["Ok"]])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    assert await turn(client, "Name three colours", "stream") == "Red, green, blue"
    stored = memory.get("c1")
    assert stored == [U("Name three colours"), A("Red, green, blue")]
    assert type(stored[1]) is AssistantMessage
    assert len(repository.appends) == 1
    await turn(client, "Again", "stream")
    second_prompt = model.prompts[1]
    assert "Red, green, blue" in "".join(m.text for m in second_prompt.instructions)


async def test_b01_no_user_message_is_rejected_before_the_model(advisor_class, mode, memory):
    memory.add("c1", [U("What is 2+2?"), A("4")])
    model = ScriptedChatModel(["ok", "ok"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    for blank in (None, "", "   "):
        with pytest.raises(ValueError, match=r"no new user message"):
            await turn(client, blank, mode, system="Be terse")
    assert model.prompts == []
    assert memory.get("c1") == [U("What is 2+2?"), A("4")]
    await turn(client, "And 3+3?", mode)
    assert memory.get("c1") == [U("What is 2+2?"), A("4"), U("And 3+3?"), A("ok")]


async def test_b01_stored_input_comes_only_from_the_request(advisor_class, mode, memory):
    # The request ends with an assistant message it supplied: there is no new input to store,
    # and the user message of the history must not be stored a second time.
    memory.add("c1", [U("What is 2+2?"), A("4")])
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    spec = client.prompt().messages(U("What is 2+2?"), A("4")).advisor_param(CONVERSATION_ID, "c1")
    with pytest.raises(ValueError, match=r"no new user message"):
        if mode == "call":
            await spec.acall()
        else:
            await spec.stream().aggregate()
    assert memory.get("c1") == [U("What is 2+2?"), A("4")]


async def test_all_new_input_messages_are_kept_and_stored_in_order(advisor_class, mode, memory):
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    spec = client.prompt().messages(U("first"), U(" "), U("second"))
    spec.advisor_param(CONVERSATION_ID, "c1")
    if mode == "call":
        await spec.acall()
    else:
        await spec.stream().aggregate()
    sent = [m for m in model.prompts[0].instructions if m.message_type.value == "user"]
    assert sent == [U("first"), U(" "), U("second")]
    # A blank user message is sent as given but not stored (Spring AI stores UserMessage("")).
    assert memory.get("c1") == [U("first"), U("second"), A("ok")]


async def test_a_tool_response_sent_by_the_caller_is_stored_with_its_call(
    advisor_class, mode, memory
):
    model = ScriptedChatModel([ChatResponse((Generation(call("t1")),)), "It is sunny"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    await turn(client, "Weather?", mode)
    spec = client.prompt().messages(T("t1")).advisor_param(CONVERSATION_ID, "c1")
    if mode == "call":
        await spec.acall()
    else:
        await spec.stream().aggregate()
    assert memory.get("c1") == [U("Weather?"), call("t1"), T("t1"), A("It is sunny")]


async def test_only_the_first_generation_is_stored(advisor_class, mode, memory):
    two = ChatResponse(
        (Generation(AssistantMessage("first")), Generation(AssistantMessage("other")))
    )
    client = ChatClient(ScriptedChatModel([two]), default_advisors=[advisor_class(memory)])
    await turn(client, "Pick", mode)
    assert memory.get("c1") == [U("Pick"), A("first")]


async def test_b04_missing_conversation_id_is_an_error(advisor_class, mode, memory):
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    with pytest.raises(ValueError, match=r"^conversationId cannot be null$"):
        await turn(client, "My name is Ann", mode, conversation_id=None)
    assert model.prompts == []
    assert memory.repository.find_conversation_ids() == []


async def test_b04_users_with_their_own_ids_never_see_each_other(advisor_class, mode, memory):
    model = ScriptedChatModel(["Hi Ann", "I don't know"])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    await turn(client, "My name is Ann", mode, conversation_id="user-x")
    await turn(client, "What is my name?", mode, conversation_id="user-y")
    assert "Ann" not in "".join(m.text for m in model.prompts[1].instructions)


async def test_b04_advisor_default_id_is_used_for_read_and_write(advisor_class, mode, memory):
    memory.add("tenant-42", [U("Earlier"), A("Noted")])
    model = ScriptedChatModel(["ok", "ok"])
    advisor = advisor_class(memory, default_conversation_id="tenant-42")
    client = ChatClient(model, default_advisors=[advisor])
    await turn(client, "Now", mode, conversation_id=None)
    assert "Noted" in "".join(m.text for m in model.prompts[0].instructions)
    assert memory.get("tenant-42")[-2:] == [U("Now"), A("ok")]
    assert memory.repository.find_conversation_ids() == ["tenant-42"]
    await turn(client, "Elsewhere", mode, conversation_id="c9")  # the context wins
    assert memory.get("c9") == [U("Elsewhere"), A("ok")]


@pytest.mark.parametrize("blank", ["", "   "])
async def test_b04_blank_ids_are_rejected_with_one_message(advisor_class, mode, memory, blank):
    client = ChatClient(ScriptedChatModel(["ok"]), default_advisors=[advisor_class(memory)])
    message = r"^conversationId cannot be null or empty$"
    with pytest.raises(ValueError, match=message):
        await turn(client, "Hi", mode, conversation_id=blank)
    with pytest.raises(ValueError, match=message):
        advisor_class(memory, default_conversation_id=blank)
    with pytest.raises(ValueError, match=message):
        memory.add(blank, U("x"))


async def test_a_failed_model_call_stores_nothing(advisor_class, mode, memory):
    memory.add("c1", [U("Hi"), A("Hello")])
    model = ScriptedChatModel([ProviderUnavailableError("down", status=503)])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    with pytest.raises(ProviderUnavailableError):
        await turn(client, "Still there?", mode)
    assert memory.repository.find_by_conversation_id("c1") == [U("Hi"), A("Hello")]


async def test_provider_error_mid_stream_stores_the_partial_reply_marked(advisor_class, memory):
    model = ScriptedChatModel([["Roses", " are", " red", ProviderUnavailableError("cut")]])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    received = []
    with pytest.raises(ProviderUnavailableError):
        async with aclosing(
            client.prompt("Write a poem").advisor_param(CONVERSATION_ID, "c1").stream().content()
        ) as deltas:
            async for delta in deltas:
                received.append(delta)
    assert "".join(received) == "Roses are red"
    user, reply = memory.get("c1")
    assert (user, reply) == (U("Write a poem"), A("Roses are red"))
    assert reply.metadata["interrupted"] is True
    assert reply.metadata["finish_reason"] == "error"


async def test_b06_closed_stream_stores_the_partial_reply_marked_cancelled(advisor_class, memory):
    words = ["Roses", " are", " red", ",", " violets", " are", " blue", ",", " sugar", " too"]
    model = ScriptedChatModel([words], chunk_delay=0.05)
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    stream = client.prompt("Write a poem").advisor_param(CONVERSATION_ID, "c1").stream().content()
    received = [await anext(stream) for _ in range(3)]
    await asyncio.wait_for(stream.aclose(), timeout=1)
    assert "".join(received) == "Roses are red"
    assert model.events == ["stream", "cancel"]
    user, reply = memory.get("c1")
    assert (user, reply) == (U("Write a poem"), A("Roses are red"))
    assert dict(reply.metadata) == {"interrupted": True, "finish_reason": "cancelled"}
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_b06_cancelled_consumer_task_stores_the_partial_reply(advisor_class, memory):
    model = ScriptedChatModel([["Roses", " are", " red", " and so on"]], chunk_delay=0.05)
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    received = []

    async def consume():
        spec = client.prompt("Write a poem").advisor_param(CONVERSATION_ID, "c1")
        async with aclosing(spec.stream().content()) as deltas:
            async for delta in deltas:
                received.append(delta)
                if len(received) == 2:
                    asyncio.current_task().cancel()

    with pytest.raises(asyncio.CancelledError):
        await asyncio.create_task(consume())
    assert memory.get("c1") == [U("Write a poem"), A("Roses are")]
    assert memory.get("c1")[1].metadata["finish_reason"] == "cancelled"
    assert "cancel" in model.events


async def test_b06_interrupted_before_any_text_stores_nothing(advisor_class, memory):
    memory.add("c1", [U("Hi"), A("Hello")])
    model = ScriptedChatModel([["", "late"], [ProviderUnavailableError("down")]], chunk_delay=0.05)
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    stream = client.prompt("Poem?").advisor_param(CONVERSATION_ID, "c1").stream().chat_responses()
    await anext(stream)  # an empty delta
    await stream.aclose()
    with pytest.raises(ProviderUnavailableError):
        await turn(client, "Poem?", "stream")
    assert memory.repository.find_by_conversation_id("c1") == [U("Hi"), A("Hello")]


async def test_concurrent_turns_on_one_conversation_are_stored_whole(advisor_class, mode, memory):
    model = ScriptedChatModel([lambda p: f"re: {p.instructions[-1].text}"] * 20)
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    await asyncio.gather(*(turn(client, f"q{i}", mode) for i in range(20)))
    stored = memory.repository.find_by_conversation_id("c1")
    assert len(stored) == 40
    for user, reply in zip(stored[::2], stored[1::2], strict=True):
        assert reply == A(f"re: {user.text}")


async def test_system_messages_are_never_stored(advisor_class, mode, memory):
    client = ChatClient(
        ScriptedChatModel(["one", "two"]),
        default_system="You are helpful",
        default_advisors=[advisor_class(memory)],
    )
    await turn(client, "Hi", mode)
    await turn(client, "Again", mode)
    assert S("You are helpful") not in memory.repository.find_by_conversation_id("c1")


def test_sync_facade(advisor_class, memory):
    client = ChatClient(ScriptedChatModel(["Hello"]), default_advisors=[advisor_class(memory)])
    assert client.prompt("Hi").advisor_param(CONVERSATION_ID, "c1").call().content() == "Hello"
    assert memory.get("c1") == [U("Hi"), A("Hello")]
