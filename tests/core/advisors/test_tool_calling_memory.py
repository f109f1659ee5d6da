"""The real tool loop with chat memory: turns stored whole, no dangling tool calls (B09, B26)."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    DEFAULT_TOOL_CALLING_ORDER,
    AssistantMessage,
    ChatClient,
    ScriptedChatModel,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor
from advisors_app.core.client import MemoryInsideToolLoopWarning
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool
from tests.core.advisors.memory_helpers import turn

MODES = ["call", "stream"]


@tool
def clock() -> str:
    """The time."""
    return "noon"


def client_with_memory(model, memory, order=None):
    advisor = (
        MessageChatMemoryAdvisor(memory)
        if order is None
        else MessageChatMemoryAdvisor(memory, order=order)
    )
    return ChatClient(model, default_advisors=[advisor], default_tools=[clock])


@pytest.mark.parametrize("mode", MODES)
async def test_memory_outside_the_loop_stores_the_turn_once_and_replays_it(mode):
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([tool_call_response(("clock", {})), "It is noon.", "You asked."])
    client = client_with_memory(model, memory)
    assert await turn(client, "What time is it?", mode) == "It is noon."
    assert await memory.aget("c1") == [
        UserMessage("What time is it?"),
        AssistantMessage("It is noon."),
    ]
    await turn(client, "What did I ask?", mode)
    assert model.prompts[2].instructions == (
        UserMessage("What time is it?"),
        AssistantMessage("It is noon."),
        UserMessage("What did I ask?"),
    )


@pytest.mark.parametrize("mode", MODES)
async def test_b26_a_stopped_loop_leaves_no_dangling_tool_call_in_memory(mode):
    @tool
    def analyze(input_data: str) -> str:
        """Analyze data."""
        return "Instructions: " + "please provide input_data. " * 80

    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([tool_call_response(("analyze", {"input_data": ""}))], repeat=True)
    client = ChatClient(
        model, default_advisors=[MessageChatMemoryAdvisor(memory)], default_tools=[analyze]
    )
    reply = await turn(client, "analyze", mode)
    assert reply.startswith("Identical tool call limit (3) exceeded for tool 'analyze'")
    stored = await memory.aget("c1")
    assert [type(m) for m in stored] == [UserMessage, AssistantMessage]
    assert not stored[1].tool_calls


@pytest.mark.parametrize("mode", MODES)
async def test_memory_inside_the_loop_switches_history_off_without_an_empty_system(mode):
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel([tool_call_response(("clock", {})), "It is noon."])
    client = client_with_memory(model, memory, order=DEFAULT_TOOL_CALLING_ORDER + 100)
    with pytest.warns(MemoryInsideToolLoopWarning):
        await turn(client, "What time is it?", mode, system="Be brief.")
    second = model.prompts[1].instructions
    assert second[0] == SystemMessage("Be brief.")
    assert isinstance(second[-1], ToolResponseMessage)
    assert SystemMessage("") not in second
    # The round's messages reach the model once each, whoever supplies them.
    assert sum(isinstance(m, ToolResponseMessage) for m in second) == 1
