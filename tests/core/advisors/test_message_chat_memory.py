"""MessageChatMemoryAdvisor prompt assembly: B02 (one system message first), de-duplication."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    ChatClient,
    ChatClientRequest,
    ChatClientResponse,
    ChatResponse,
    Prompt,
    ScriptedChatModel,
    SystemMessage,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor
from advisors_app.core.memory import MessageWindowChatMemory
from tests.core.advisors.memory_helpers import turn
from tests.core.memory.messages import A, S, U

pytestmark = pytest.mark.parametrize("mode", ["call", "stream"])


def client_with(memory, *replies, system=None):
    model = ScriptedChatModel(list(replies))
    advisor = MessageChatMemoryAdvisor(memory)
    return model, ChatClient(model, default_system=system, default_advisors=[advisor])


async def test_b02_system_message_stays_first_across_turns(mode):
    memory = MessageWindowChatMemory()
    model, client = client_with(memory, "Hello", "Again?", "Third", system="You are helpful")
    await turn(client, "Hi", mode)
    await turn(client, "Once more", mode)
    await turn(client, "And again", mode)
    assert model.prompts[1].instructions == (
        S("You are helpful"),
        U("Hi"),
        A("Hello"),
        U("Once more"),
    )
    for prompt in model.prompts:
        systems = [i for i, m in enumerate(prompt.instructions) if isinstance(m, SystemMessage)]
        assert systems == [0]


async def test_b02_stored_and_requested_system_messages_merge_into_one(mode):
    memory = MessageWindowChatMemory()
    memory.add("c1", [S("You are a pirate"), U("Hi"), A("Arr")])
    model, client = client_with(memory, "Aye", system="You are helpful")
    await turn(client, "Again", mode)
    assert model.prompts[0].instructions == (
        S("You are a pirate\n\nYou are helpful"),
        U("Hi"),
        A("Arr"),
        U("Again"),
    )


async def test_a_system_message_in_the_middle_of_the_request_moves_to_the_front(mode):
    memory = MessageWindowChatMemory()
    memory.add("c1", [U("Hi"), A("Hello")])
    model, client = client_with(memory, "ok")
    spec = client.prompt().messages(U("Now"), S("Late rule"), S("Late rule"))
    spec.advisor_param(CONVERSATION_ID, "c1")
    if mode == "call":
        await spec.acall()
    else:
        await spec.stream().aggregate()
    assert model.prompts[0].instructions == (S("Late rule"), U("Hi"), A("Hello"), U("Now"))


async def test_history_sent_by_the_caller_is_not_added_again(mode):
    memory = MessageWindowChatMemory()
    memory.add("c1", [U("Hi").with_metadata(stored=True), A("Hello")])
    model, client = client_with(memory, "ok")
    spec = client.prompt().messages(U("Hi"), A("Hello"), U("Next"))
    spec.advisor_param(CONVERSATION_ID, "c1")
    if mode == "call":
        await spec.acall()
    else:
        await spec.stream().aggregate()
    assert model.prompts[0].instructions == (U("Hi"), A("Hello"), U("Next"))
    assert memory.get("c1") == [U("Hi"), A("Hello"), U("Next"), A("ok")]


async def test_history_partly_sent_by_the_caller_is_completed_not_duplicated(mode):
    memory = MessageWindowChatMemory()
    memory.add("c1", [U("1"), A("a1"), U("2"), A("a2")])
    model, client = client_with(memory, "ok")
    spec = client.prompt().messages(U("2"), A("a2"), U("3"))
    spec.advisor_param(CONVERSATION_ID, "c1")
    if mode == "call":
        await spec.acall()
    else:
        await spec.stream().aggregate()
    assert model.prompts[0].instructions == (U("1"), A("a1"), U("2"), A("a2"), U("3"))


async def test_the_window_is_what_the_model_sees(mode):
    memory = MessageWindowChatMemory(max_messages=2)
    model, client = client_with(memory, "a1", "a2", "a3")
    for text in ("1", "2", "3"):
        await turn(client, text, mode)
    assert model.prompts[2].instructions == (U("2"), A("a2"), U("3"))
    assert len(memory.repository.find_by_conversation_id("c1")) == 6


async def test_advise_request_keeps_options_and_context(mode):
    memory = MessageWindowChatMemory()
    memory.add("c1", [U("Hi"), A("Hello")])
    seen = {}

    class Capture:
        async def next_call(self, request):
            seen["request"] = request
            return ChatClientResponse(ChatResponse.of_text("ok"), request.context)

        async def next_stream(self, request):
            seen["request"] = request
            yield ChatClientResponse(ChatResponse.of_text("ok"), request.context)

    request = ChatClientRequest(Prompt("Next"), {CONVERSATION_ID: "c1", "k": "v"})
    advisor = MessageChatMemoryAdvisor(memory)
    if mode == "call":
        await advisor.advise_call(request, Capture())
    else:
        [_ async for _ in advisor.advise_stream(request, Capture())]
    assert seen["request"].context["k"] == "v"
    assert seen["request"].prompt.instructions == (U("Hi"), A("Hello"), U("Next"))
