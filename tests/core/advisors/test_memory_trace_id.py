"""Memory advisors write the context's trace id into the reply they store (and nothing else)."""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.core import CONVERSATION_ID, ChatClient, ScriptedChatModel
from advisors_app.core.advisors import MessageChatMemoryAdvisor, PromptChatMemoryAdvisor
from advisors_app.core.attributes import TRACE_ID
from advisors_app.core.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory


def client(*answers: Any, advisor: type = MessageChatMemoryAdvisor) -> tuple[ChatClient, Any]:
    repository = InMemoryChatMemoryRepository()
    memory = MessageWindowChatMemory(repository)
    model = ScriptedChatModel(list(answers))
    return ChatClient(model, default_advisors=[advisor(memory)]), repository


@pytest.mark.parametrize("advisor", [MessageChatMemoryAdvisor, PromptChatMemoryAdvisor])
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_the_stored_reply_carries_the_turns_trace_id(advisor: type, mode: str) -> None:
    chat, repository = client("one", "two", advisor=advisor)
    for text, trace_id in (("first", "t1"), ("second", None)):
        spec = chat.prompt().user(text).advisor_param(CONVERSATION_ID, "c1")
        if trace_id is not None:
            spec = spec.advisor_param(TRACE_ID, trace_id)
        if mode == "call":
            await spec.acall()
        else:
            [_ async for _ in spec.stream().content()]
    stored = [(m.text, dict(m.metadata)) for m in repository.find_by_conversation_id("c1")]
    assert stored == [
        ("first", {}),
        ("one", {"trace_id": "t1"}),
        ("second", {}),
        ("two", {}),  # no trace id in the context: none stored
    ]


async def test_an_interrupted_reply_carries_it_too() -> None:
    chat, repository = client(["par", "tial", RuntimeError("boom")])
    spec = chat.prompt().user("hi").advisor_params({CONVERSATION_ID: "c1", TRACE_ID: "t9"})
    with pytest.raises(RuntimeError):
        [_ async for _ in spec.stream().content()]
    [_, reply] = repository.find_by_conversation_id("c1")
    assert dict(reply.metadata) == {"interrupted": True, "finish_reason": "error", "trace_id": "t9"}
