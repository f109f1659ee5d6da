"""Messages an advisor injects into the tool loop stay in the turn (Spring AI #6842).

An application's ``ToolCallingAdvisor`` subclass appends feedback to the next round's messages
after an ``edit`` tool ran; the model reads it and calls ``read``. In Spring AI 2.0.1 the round
after that no longer carries the feedback (on the streaming path): the loop ran the tools over
its own copy of the turn, which never saw the injected message. Here the feedback stays in every
later round, in call and stream, once, where it was injected.
"""

from __future__ import annotations

import pytest

from advisors_app.core import (
    DEFAULT_TOOL_CALLING_ORDER,
    ChatClient,
    ScriptedChatModel,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor, ToolCallingAdvisor
from advisors_app.core.client import MemoryInsideToolLoopWarning
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool
from tests.core.advisors.helpers import run

FEEDBACK = UserMessage("FOO_BAR_FEEDBACK: the edit broke a test, read the file again")


@tool
def edit(path: str) -> str:
    """Edit a file."""
    return f"edited {path}"


@tool
def read(path: str) -> str:
    """Read a file."""
    return f"contents of {path}"


class FeedbackAdvisor(ToolCallingAdvisor):
    """Appends :data:`FEEDBACK` to the next round after each ``edit`` call."""

    async def do_get_next_instructions_for_tool_call(self, request, response, result):
        instructions = await super().do_get_next_instructions_for_tool_call(
            request, response, result
        )
        last = result.conversation_history[-1]
        if isinstance(last, ToolResponseMessage) and any(r.name == "edit" for r in last.responses):
            return (*instructions, FEEDBACK)
        return instructions


def script():
    return ScriptedChatModel(
        [
            tool_call_response(("edit", {"path": "a.py"})),
            tool_call_response(("read", {"path": "a.py"})),
            "Fixed.",
        ]
    )


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_injected_feedback_survives_the_next_tool_call(mode):
    model = script()
    client = ChatClient(model, default_advisors=[FeedbackAdvisor()], default_tools=[edit, read])
    response = await run(mode, client, "Fix a.py")
    assert response.chat_response.text == "Fixed."
    _, second, third = (p.instructions for p in model.prompts)
    assert second.count(FEEDBACK) == 1 and second[-1] == FEEDBACK
    assert third.count(FEEDBACK) == 1
    # The feedback keeps its place: after the edit's result, before the read's call.
    at = third.index(FEEDBACK)
    assert isinstance(third[at - 1], ToolResponseMessage)
    assert third[at - 1].responses[0].name == "edit"
    assert third[at + 1].tool_calls[0].name == "read"


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_injected_feedback_reaches_a_memory_inside_the_loop(mode):
    # History disabled: each round sends only the latest messages, and the memory advisor inside
    # the loop supplies the rest, the injected feedback included.
    memory = MessageWindowChatMemory()
    model = script()
    client = ChatClient(
        model,
        default_advisors=[
            FeedbackAdvisor(conversation_history_enabled=False),
            MessageChatMemoryAdvisor(memory, order=DEFAULT_TOOL_CALLING_ORDER + 100),
        ],
        default_tools=[edit, read],
    )
    with pytest.warns(MemoryInsideToolLoopWarning):
        await run(mode, client, "Fix a.py", chat_memory_conversation_id="c1")
    third = model.prompts[2].instructions
    assert third.count(FEEDBACK) == 1
    assert third[third.index(FEEDBACK) + 1].tool_calls[0].name == "read"
    stored = await memory.aget("c1")
    assert stored.count(FEEDBACK) == 1
    assert stored[-1].text == "Fixed."
