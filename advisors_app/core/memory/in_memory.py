"""``InMemoryChatMemoryRepository``: conversations in a dict, for tests and single-process use."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from ..messages import Message, MessageType
from .ids import check_conversation_id
from .repository import ChatMemoryRepository, check_limit, check_messages

__all__ = ["InMemoryChatMemoryRepository"]


class _Transcript:
    """One conversation: the full transcript plus the views the window reads in O(window)."""

    __slots__ = ("conversation", "entries", "next_sequence", "system_sequences")

    def __init__(self) -> None:
        self.entries: dict[int, Message] = {}  # sequence -> message, in order
        self.conversation: list[Message] = []  # non-system messages, in order
        self.system_sequences: list[int] = []
        self.next_sequence = 0

    def extend(self, messages: Sequence[Message]) -> None:
        for message in messages:
            sequence = self.next_sequence
            self.next_sequence += 1
            self.entries[sequence] = message
            if message.message_type is MessageType.SYSTEM:
                self.system_sequences.append(sequence)
            else:
                self.conversation.append(message)

    def drop_system(self) -> None:
        for sequence in self.system_sequences:
            del self.entries[sequence]
        self.system_sequences.clear()


class InMemoryChatMemoryRepository(ChatMemoryRepository):
    """A thread-safe, process-local repository (Spring AI ``InMemoryChatMemoryRepository``).

    ``append`` costs O(batch) and ``find_last`` O(limit). Divergence (defect 5.3.20): ``save_all``
    and ``append`` store a copy of the given sequence, so later changes to the caller's list do
    not leak in (messages themselves are immutable values). Async twins run inline: nothing here
    blocks, so they never pay a thread hop. Data lives as long as the object.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._conversations: dict[str, _Transcript] = {}

    def find_conversation_ids(self) -> list[str]:
        with self._lock:
            return list(self._conversations)

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        with self._lock:
            transcript = self._conversations.get(conversation_id)
            return list(transcript.entries.values()) if transcript else []

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        check_conversation_id(conversation_id)
        batch = check_messages(messages)
        transcript = _Transcript()
        transcript.extend(batch)
        with self._lock:
            self._conversations[conversation_id] = transcript

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        check_conversation_id(conversation_id)
        with self._lock:
            self._conversations.pop(conversation_id, None)

    def append(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        check_conversation_id(conversation_id)
        batch = check_messages(messages)
        if not batch and not replace_system:
            return
        with self._lock:
            transcript = self._conversations.get(conversation_id)
            if transcript is None:
                transcript = self._conversations[conversation_id] = _Transcript()
            if replace_system:
                transcript.drop_system()
            transcript.extend(batch)

    def find_last(self, conversation_id: str, limit: int) -> list[Message]:
        check_conversation_id(conversation_id)
        check_limit(limit)
        if limit == 0:
            return []
        with self._lock:
            transcript = self._conversations.get(conversation_id)
            return transcript.conversation[-limit:] if transcript else []

    def find_system_messages(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id)
        with self._lock:
            transcript = self._conversations.get(conversation_id)
            if transcript is None:
                return []
            return [transcript.entries[s] for s in transcript.system_sequences]

    async def afind_conversation_ids(self) -> list[str]:
        return self.find_conversation_ids()

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]:
        return self.find_by_conversation_id(conversation_id)

    async def asave_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self.save_all(conversation_id, messages)

    async def adelete_by_conversation_id(self, conversation_id: str) -> None:
        self.delete_by_conversation_id(conversation_id)

    async def aappend(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        self.append(conversation_id, messages, replace_system=replace_system)

    async def afind_last(self, conversation_id: str, limit: int) -> list[Message]:
        return self.find_last(conversation_id, limit)

    async def afind_system_messages(self, conversation_id: str) -> list[Message]:
        return self.find_system_messages(conversation_id)
