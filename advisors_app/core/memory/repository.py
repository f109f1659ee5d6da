"""Where conversations are stored (Spring AI ``ChatMemoryRepository``).

A repository keeps a conversation's **whole transcript**, in order; a ``ChatMemory`` applies its
window when reading (``MessageWindowChatMemory``), so the admin can still show every message.

Spring AI's four operations are kept with their semantics (``save_all`` replaces the whole
conversation). Spring AI's memory calls ``save_all`` on every ``add``, so each message costs a
rewrite of the conversation and concurrent adds lose updates (defect 5.3.19). The contract
therefore adds three operations, each with an async twin:

* ``append(id, messages, replace_system=False)``: adds a batch at the end, atomically, in
  O(batch); with ``replace_system`` the stored system messages are deleted in the same step;
* ``find_last(id, limit)``: the newest ``limit`` non-system messages, oldest first, in O(limit);
* ``find_system_messages(id)``: the stored system messages, oldest first.

The defaults below build these from the four Spring operations (O(conversation) each) so that a
repository implementing only Spring's contract still works; real backends override them. Async
twins default to running the sync method in a worker thread; a non-blocking backend overrides
them to avoid the hop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence

from ..messages import Message, MessageType
from .ids import check_conversation_id

__all__ = ["ChatMemoryRepository", "check_limit", "check_messages"]

_MESSAGE_TYPES = tuple(MessageType)


def check_messages(messages: Iterable[Message] | None) -> list[Message]:
    """``messages`` as a new list; ``ValueError`` for ``None``, ``None`` elements or non-messages.

    The messages are Spring AI's: ``"messages cannot be null"``, ``"messages cannot contain null
    elements"``.
    """
    if messages is None:
        raise ValueError("messages cannot be null")
    listed = list(messages)
    for message in listed:
        if message is None:
            raise ValueError("messages cannot contain null elements")
        if getattr(message, "message_type", None) not in _MESSAGE_TYPES:
            raise ValueError(
                f"messages must be chat messages (UserMessage, AssistantMessage, ...), "
                f"got {type(message).__name__}"
            )
    return listed


def check_limit(limit: int) -> int:
    """``limit`` if it is an ``int`` >= 0, else ``ValueError``."""
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
        raise ValueError(f"limit must be an integer >= 0, got {limit!r}")
    return limit


def _is_system(message: Message) -> bool:
    return message.message_type is MessageType.SYSTEM


class ChatMemoryRepository:
    """Stores conversations as ordered message lists, keyed by conversation id.

    Conversation ids are checked with
    :func:`~advisors_app.core.memory.ids.check_conversation_id` (``ValueError``). Reads of an
    unknown id return empty lists. Implementations must be safe to share between threads and
    concurrent requests.
    """

    # Spring AI's contract -------------------------------------------------------------------

    def find_conversation_ids(self) -> list[str]:
        """Every stored conversation id."""
        raise NotImplementedError

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        """The whole stored conversation, oldest first (a new list)."""
        raise NotImplementedError

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        """Replace the stored conversation with ``messages`` (Spring AI ``saveAll``)."""
        raise NotImplementedError

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        """Forget the conversation; unknown ids are ignored."""
        raise NotImplementedError

    # Efficient extension (defaults in terms of the four operations above) --------------------

    def append(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        """Add ``messages`` at the end of the conversation, all or none.

        With ``replace_system=True`` the system messages stored so far are deleted first, in
        the same atomic step. Real backends do this in O(len(messages)); this default rewrites
        the conversation with ``save_all``.
        """
        check_conversation_id(conversation_id)
        batch = check_messages(messages)
        stored = self.find_by_conversation_id(conversation_id)
        if replace_system:
            stored = [m for m in stored if not _is_system(m)]
        self.save_all(conversation_id, [*stored, *batch])

    def find_last(self, conversation_id: str, limit: int) -> list[Message]:
        """The newest ``limit`` non-system messages of the conversation, oldest first."""
        check_limit(limit)
        if limit == 0:
            return []
        messages = [m for m in self.find_by_conversation_id(conversation_id) if not _is_system(m)]
        return messages[-limit:]

    def find_system_messages(self, conversation_id: str) -> list[Message]:
        """The stored system messages of the conversation, oldest first."""
        return [m for m in self.find_by_conversation_id(conversation_id) if _is_system(m)]

    # Async twins ----------------------------------------------------------------------------

    async def afind_conversation_ids(self) -> list[str]:
        return await asyncio.to_thread(self.find_conversation_ids)

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return await asyncio.to_thread(self.find_by_conversation_id, conversation_id)

    async def asave_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        await asyncio.to_thread(self.save_all, conversation_id, messages)

    async def adelete_by_conversation_id(self, conversation_id: str) -> None:
        await asyncio.to_thread(self.delete_by_conversation_id, conversation_id)

    async def aappend(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        await asyncio.to_thread(
            lambda: self.append(conversation_id, messages, replace_system=replace_system)
        )

    async def afind_last(self, conversation_id: str, limit: int) -> list[Message]:
        return await asyncio.to_thread(self.find_last, conversation_id, limit)

    async def afind_system_messages(self, conversation_id: str) -> list[Message]:
        return await asyncio.to_thread(self.find_system_messages, conversation_id)
