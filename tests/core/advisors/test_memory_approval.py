"""Chat memory around a paused tool loop: the pending call is stored, a resume stores its
round, a new message answers the pending calls as not executed; history stays valid."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    AssistantMessage,
    ChatClient,
    ChatClientResponseAccumulator,
    ScriptedChatModel,
    ToolCall,
    ToolCallDecision,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor, ToolCallingAdvisor
from advisors_app.core.advisors.base_chat_memory import NOT_EXECUTED
from advisors_app.core.advisors.tool_calling import APPROVAL_REQUIRED
from advisors_app.core.attributes import CONVERSATION_ID, PRINCIPAL, TOOL_CALL_DECISIONS
from advisors_app.core.memory import (
    APPROVAL_PENDING,
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
)
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import ToolCallingManager, ToolContext, tool

MODES = ["call", "stream"]
notes: list[tuple[str, object]] = []


@pytest.fixture(autouse=True)
def _clear():
    notes.clear()


@tool(requires_approval=True)
def save_note(text: str, context: ToolContext) -> str:
    """Save a note."""
    notes.append((text, context.get(PRINCIPAL)))
    return f"saved {text}"


def chain(model, memory):
    return ChatClient(
        model,
        default_advisors=(
            MessageChatMemoryAdvisor(memory),
            ToolCallingAdvisor(ToolCallingManager()),
        ),
    )


async def run(spec, mode):
    if mode == "call":
        return await (await spec.acall()).achat_response()
    accumulator = ChatClientResponseAccumulator()
    async for chunk in spec.stream().chat_client_responses():
        accumulator.add(chunk)
    return accumulator.result().chat_response


def stored(memory):
    return memory.get("c1")


def ask(client, text, **context):
    return (
        client.prompt(text)
        .tools(save_note)
        .advisor_params({CONVERSATION_ID: "c1", PRINCIPAL: "alice", **context})
    )


@pytest.mark.parametrize("mode", MODES)
async def test_pause_stores_the_call_flagged_pending_and_resume_stores_its_round(mode):
    model = ScriptedChatModel(
        [tool_call_response(ToolCall("n1", "save_note", '{"text": "milk"}')), "Saved it."]
    )
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = chain(model, memory)

    paused = await run(ask(client, "note milk"), mode)

    assert paused.result.metadata.finish_reason == APPROVAL_REQUIRED
    assert notes == []
    user, call = stored(memory)
    assert isinstance(user, UserMessage) and call.tool_calls[0].id == "n1"
    assert call.metadata[APPROVAL_PENDING] is True

    decisions = (ToolCallDecision.approve("n1"),)
    resumed = await run(ask(client, None, **{TOOL_CALL_DECISIONS: decisions}), mode)

    assert resumed.result.output.text == "Saved it."
    assert notes == [("milk", "alice")]  # the tool learnt who the turn is for
    messages = stored(memory)
    assert [type(m).__name__ for m in messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]
    assert messages[2].responses[0].response_data == "saved milk"
    # The model's second round saw the call and its result.
    assert isinstance(model.prompts[-1].instructions[-1], ToolResponseMessage)


@pytest.mark.parametrize("mode", MODES)
async def test_a_new_message_answers_the_pending_call_as_not_executed(mode):
    model = ScriptedChatModel(
        [tool_call_response(ToolCall("n1", "save_note", '{"text": "milk"}')), "Something else."]
    )
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = chain(model, memory)
    await run(ask(client, "note milk"), mode)

    answer = await run(ask(client, "never mind"), mode)

    assert answer.result.output.text == "Something else."
    assert notes == []
    messages = stored(memory)
    kinds = [type(m).__name__ for m in messages]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    answered = messages[2]
    assert answered.metadata[NOT_EXECUTED] is True
    assert "was not executed" in answered.responses[0].response_data
    sent = model.prompts[-1].instructions
    assert isinstance(sent[-2], ToolResponseMessage) and sent[-1].text == "never mind"


async def test_decisions_without_a_pending_call_are_refused():
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = chain(ScriptedChatModel(["hi"]), memory)
    decisions = (ToolCallDecision.approve("n1"),)
    with pytest.raises(ValueError, match="no tool calls waiting"):
        await run(ask(client, None, **{TOOL_CALL_DECISIONS: decisions}), "call")


async def test_decisions_with_a_new_message_are_refused():
    model = ScriptedChatModel([tool_call_response(ToolCall("n1", "save_note", '{"text": "m"}'))])
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = chain(model, memory)
    await run(ask(client, "note"), "call")
    decisions = (ToolCallDecision.approve("n1"),)
    with pytest.raises(ValueError, match="must not carry new messages"):
        await run(ask(client, "also this", **{TOOL_CALL_DECISIONS: decisions}), "call")


async def test_an_interrupted_resume_still_answers_its_calls():
    model = ScriptedChatModel(
        [
            tool_call_response(ToolCall("n1", "save_note", '{"text": "m"}')),
            ["Sav", RuntimeError("provider down")],
        ]
    )
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    client = chain(model, memory)
    await run(ask(client, "note"), "stream")
    decisions = (ToolCallDecision.approve("n1"),)
    with pytest.raises(RuntimeError):
        await run(ask(client, None, **{TOOL_CALL_DECISIONS: decisions}), "stream")
    messages = stored(memory)
    assert isinstance(messages[2], ToolResponseMessage)
    assert "No result was recorded" in messages[2].responses[0].response_data
    assert isinstance(messages[3], AssistantMessage) and messages[3].text == "Sav"
