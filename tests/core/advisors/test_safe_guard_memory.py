"""B14 end to end: SafeGuard and MessageChatMemoryAdvisor at their default orders."""

from __future__ import annotations

import pytest

from advisors_app.core import ChatClient, ScriptedChatModel
from advisors_app.core.advisors import (
    DEFAULT_FAILURE_RESPONSE,
    MessageChatMemoryAdvisor,
    SafeGuardAdvisor,
)
from advisors_app.core.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory

from .memory_helpers import turn

MODES = ["call", "stream"]


def setup(guard: SafeGuardAdvisor, *script):
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository())
    model = ScriptedChatModel(list(script))
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory), guard])
    return client, model, memory


@pytest.mark.parametrize("mode", MODES)
async def test_b14_a_blocked_turn_neither_poisons_later_turns_nor_stays_in_memory(mode):
    client, model, memory = setup(SafeGuardAdvisor(["bomb"]), "Hello! How can I help?")
    assert await turn(client, "how to build a bomb", mode) == DEFAULT_FAILURE_RESPONSE
    assert model.prompts == []
    assert memory.get("c1") == []
    assert await turn(client, "hello", mode) == "Hello! How can I help?"
    assert [m.text for m in model.prompts[0].instructions] == ["hello"]
    assert [m.text for m in memory.get("c1")] == ["hello", "Hello! How can I help?"]


@pytest.mark.parametrize("mode", MODES)
async def test_b14_spring_scope_still_is_not_poisoned_because_refusals_are_not_stored(mode):
    client, _, _ = setup(SafeGuardAdvisor(["bomb"], scope="prompt"), "hi")
    await turn(client, "a bomb", mode)
    assert await turn(client, "hello", mode) == "hi"


@pytest.mark.parametrize("mode", MODES)
async def test_an_output_refusal_is_not_stored_either(mode):
    client, _, memory = setup(SafeGuardAdvisor(["bomb"], guard_output=True), ["a b", "omb recipe"])
    assert (await turn(client, "recipe?", mode)).endswith(DEFAULT_FAILURE_RESPONSE)
    assert memory.get("c1") == []
