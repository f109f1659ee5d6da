"""Shared pieces of the memory-advisor tests: a client, one turn in call or stream mode."""

from __future__ import annotations

from contextlib import aclosing

from advisors_app.core import CONVERSATION_ID, ChatClient
from advisors_app.core.memory import InMemoryChatMemoryRepository


class CountingRepository(InMemoryChatMemoryRepository):
    """Counts the appends, to check that a turn is written once, in one step."""

    def __init__(self) -> None:
        super().__init__()
        self.appends: list[list] = []

    def append(self, conversation_id, messages, *, replace_system=False):
        self.appends.append(list(messages))
        super().append(conversation_id, messages, replace_system=replace_system)


async def turn(client: ChatClient, text, mode: str, conversation_id="c1", *, system=None):
    """Run one turn; returns the reply text. ``text=None`` sends no user message."""
    spec = client.prompt()
    if text is not None:
        spec.user(text)
    if system is not None:
        spec.system(system)
    if conversation_id is not None:
        spec.advisor_param(CONVERSATION_ID, conversation_id)
    if mode == "call":
        return (await spec.acall()).content()
    async with aclosing(spec.stream().content()) as deltas:
        return "".join([delta async for delta in deltas])
