"""``TurnMemory``: one turn's conversation, read before the chain runs and written after it.

A host that stores each turn itself, in one step with everything else the turn leaves — the
Django app's turn (``advisors_app.turn``: messages, call log, costs and approvals in one
transaction) — reads the conversation's newest messages before the chain runs, with its other
reads, and puts a :class:`TurnMemory` in the request context under
:data:`~advisors_app.core.attributes.TURN_MEMORY`. The memory advisors then

* read the conversation through it: from the messages read ahead (:class:`ReadAhead`), and from
  their own repository only for what those do not reach
  (:meth:`TurnMemory.repository`, :meth:`ChatMemory.for_turn
  <advisors_app.core.memory.chat_memory.ChatMemory.for_turn>`);
* hand it what they would store (:meth:`TurnMemory.append`) and the compactions they would ask
  for (:meth:`TurnMemory.request_compaction`) instead of storing or compacting;

and the host writes :attr:`TurnMemory.appends` with the rest of the turn. Reads made during the
turn see the held appends as if they were stored (memory inside the tool loop reads again after
its own append). A request without a ``TurnMemory`` for its conversation — plain-Python use of
the core — reads and writes the advisors' ``ChatMemory`` or ``SessionRepository`` as before.

Not in Spring AI, whose memory advisors write through their ``ChatMemory`` while the call runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..attributes import TURN_MEMORY
from ..messages import Message, MessageType
from .ids import check_conversation_id
from .repository import ChatMemoryRepository, check_limit, check_messages
from .session import SessionRepository

__all__ = ["CompactionRequest", "HeldAppend", "ReadAhead", "TurnMemory", "turn_memory_of"]


@dataclass(frozen=True, slots=True)
class ReadAhead:
    """A conversation's newest messages as read before the turn: ``system`` (every stored
    system message, oldest first), ``tail`` (the newest non-system messages, oldest first) and
    ``complete`` (``tail`` reaches the conversation's first message: nothing older exists)."""

    system: tuple[Message, ...] = ()
    tail: tuple[Message, ...] = ()
    complete: bool = True


@dataclass(frozen=True, slots=True)
class HeldAppend:
    """One ``append`` a memory made during the turn, held for the host to write in order
    (``replace_system``: the stored system messages go first, as
    ``ChatMemoryRepository.append`` says)."""

    messages: tuple[Message, ...]
    replace_system: bool = False


@dataclass(frozen=True, slots=True)
class CompactionRequest:
    """A session memory's request to compact ``conversation_id`` once the turn is stored. The
    host :meth:`submits <submit>` it to ``repository`` then, or queues the compaction its own
    way (the Django turn queues its compaction task when its transaction commits)."""

    conversation_id: str
    repository: SessionRepository
    #: Compacts now, in this process (what ``SessionRepository.arequest_compaction`` runs).
    run: Callable[[], Awaitable[Any]]

    async def submit(self) -> None:
        """Hand the request to its repository (``arequest_compaction``)."""
        await self.repository.arequest_compaction(self.conversation_id, self.run)


class TurnMemory:
    """One turn's hold on its conversation ``conversation_id`` (see the module docstring).

    ``read_ahead`` is what the host read before the turn (``None``: nothing; reads go to the
    memory's repository). Per-turn state: create one per turn, in its request context. The
    host reads :attr:`appends` and :attr:`compactions` once the chain has ended.
    """

    __slots__ = ("appends", "compactions", "conversation_id", "read_ahead")

    def __init__(self, conversation_id: str, read_ahead: ReadAhead | None = None) -> None:
        self.conversation_id = check_conversation_id(conversation_id)
        self.read_ahead = read_ahead
        #: What the turn's memory would have stored, in order.
        self.appends: list[HeldAppend] = []
        #: The compactions the turn's session memory asked for.
        self.compactions: list[CompactionRequest] = []

    def holds(self, conversation_id: str) -> bool:
        """Whether this is the turn of ``conversation_id``."""
        return conversation_id == self.conversation_id

    def append(self, messages: Sequence[Message], *, replace_system: bool = False) -> None:
        """Hold ``messages`` for the host to write (nothing for an empty batch that replaces
        nothing)."""
        batch = tuple(check_messages(messages))
        if batch or replace_system:
            self.appends.append(HeldAppend(batch, replace_system))

    def request_compaction(
        self, repository: SessionRepository, run: Callable[[], Awaitable[Any]]
    ) -> None:
        """Ask for a compaction of the conversation once the turn is stored."""
        self.compactions.append(CompactionRequest(self.conversation_id, repository, run))

    def held(self) -> list[Message]:
        """Every message held so far, in order."""
        return [message for append in self.appends for message in append.messages]

    def after(self, stored: Sequence[Message]) -> list[Message]:
        """The whole conversation after the held appends, ``stored`` being it before the
        turn."""
        messages = list(stored)
        for append in self.appends:
            if append.replace_system:
                messages = [m for m in messages if m.message_type is not MessageType.SYSTEM]
            messages.extend(append.messages)
        return messages

    def system_messages(self, stored: Sequence[Message]) -> list[Message]:
        """The conversation's system messages after the held appends, ``stored`` being those
        stored before the turn."""
        system = list(stored)
        for append in self.appends:
            added = [m for m in append.messages if m.message_type is MessageType.SYSTEM]
            system = added if append.replace_system else [*system, *added]
        return system

    def held_tail(self) -> list[Message]:
        """The held non-system messages, in order (the newest of the conversation)."""
        return [m for m in self.held() if m.message_type is not MessageType.SYSTEM]

    def revise_reply(self, message: Message) -> bool:
        """Hold ``message`` instead of the last held assistant message — an advisor outside
        memory that withheld the answer memory held (a guard's refusal of the output): the
        conversation keeps what the user was told. ``False`` when none is held."""
        for at in range(len(self.appends) - 1, -1, -1):
            held = self.appends[at]
            for index in range(len(held.messages) - 1, -1, -1):
                if held.messages[index].message_type is MessageType.ASSISTANT:
                    messages = list(held.messages)
                    messages[index] = message
                    self.appends[at] = HeldAppend(tuple(messages), held.replace_system)
                    return True
        return False

    def repository(self, stored: ChatMemoryRepository) -> ChatMemoryRepository:
        """``stored`` as this turn sees it: its conversation's reads answered from the
        messages read ahead and the held appends, going to ``stored`` only for what those do
        not reach; its appends held. Other conversations go to ``stored`` unchanged."""
        return _TurnRepository(self, stored)


def turn_memory_of(context: Mapping[str, Any], conversation_id: str) -> TurnMemory | None:
    """The request context's :class:`TurnMemory` when it holds ``conversation_id``."""
    found = context.get(TURN_MEMORY)
    if isinstance(found, TurnMemory) and found.holds(conversation_id):
        return found
    return None


class _TurnRepository(ChatMemoryRepository):
    """A repository's view of one turn's conversation (:meth:`TurnMemory.repository`)."""

    def __init__(self, turn: TurnMemory, stored: ChatMemoryRepository) -> None:
        self._turn = turn
        self._stored = stored

    def _window(self, limit: int) -> list[Message] | None:
        """The newest ``limit`` non-system messages if the read-ahead and the held appends
        hold them (``None``: the older ones must be read)."""
        held = self._turn.held_tail()
        if limit <= len(held):
            return held[len(held) - limit :] if limit else []
        ahead = self._turn.read_ahead
        if ahead is None:
            return None
        tail = [*ahead.tail, *held]
        if len(tail) >= limit:
            return tail[len(tail) - limit :]
        return tail if ahead.complete else None

    def _with_held(self, stored: list[Message], limit: int) -> list[Message]:
        """The newest ``limit`` messages: ``stored`` (the newest before the turn), then the
        held ones."""
        return [*stored, *self._turn.held_tail()][-limit:] if limit else []

    # Spring AI's contract: the turn's conversation with its held appends --------------------

    def find_conversation_ids(self) -> list[str]:
        return self._stored.find_conversation_ids()

    def find_by_conversation_id(self, conversation_id: str) -> list[Message]:
        stored = self._stored.find_by_conversation_id(conversation_id)
        return self._turn.after(stored) if self._turn.holds(conversation_id) else stored

    def save_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        self._stored.save_all(conversation_id, messages)

    def delete_by_conversation_id(self, conversation_id: str) -> None:
        self._stored.delete_by_conversation_id(conversation_id)

    # The extension ------------------------------------------------------------------------

    def append(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        if self._turn.holds(conversation_id):
            self._turn.append(messages, replace_system=replace_system)
        else:
            self._stored.append(conversation_id, messages, replace_system=replace_system)

    def find_last(self, conversation_id: str, limit: int) -> list[Message]:
        check_limit(limit)
        if not self._turn.holds(conversation_id):
            return self._stored.find_last(conversation_id, limit)
        found = self._window(limit)
        if found is not None:
            return found
        held = len(self._turn.held_tail())
        return self._with_held(self._stored.find_last(conversation_id, limit - held), limit)

    def find_system_messages(self, conversation_id: str) -> list[Message]:
        if not self._turn.holds(conversation_id):
            return self._stored.find_system_messages(conversation_id)
        ahead = self._turn.read_ahead
        stored = (
            ahead.system
            if ahead is not None
            else self._stored.find_system_messages(conversation_id)
        )
        return self._turn.system_messages(stored)

    # Async twins: answered without awaiting when the turn holds the answer -----------------

    async def afind_conversation_ids(self) -> list[str]:
        return await self._stored.afind_conversation_ids()

    async def afind_by_conversation_id(self, conversation_id: str) -> list[Message]:
        stored = await self._stored.afind_by_conversation_id(conversation_id)
        return self._turn.after(stored) if self._turn.holds(conversation_id) else stored

    async def asave_all(self, conversation_id: str, messages: Sequence[Message]) -> None:
        await self._stored.asave_all(conversation_id, messages)

    async def adelete_by_conversation_id(self, conversation_id: str) -> None:
        await self._stored.adelete_by_conversation_id(conversation_id)

    async def aappend(
        self, conversation_id: str, messages: Sequence[Message], *, replace_system: bool = False
    ) -> None:
        if self._turn.holds(conversation_id):
            self._turn.append(messages, replace_system=replace_system)
        else:
            await self._stored.aappend(conversation_id, messages, replace_system=replace_system)

    async def afind_last(self, conversation_id: str, limit: int) -> list[Message]:
        check_limit(limit)
        if not self._turn.holds(conversation_id):
            return await self._stored.afind_last(conversation_id, limit)
        found = self._window(limit)
        if found is not None:
            return found
        held = len(self._turn.held_tail())
        older = await self._stored.afind_last(conversation_id, limit - held)
        return self._with_held(older, limit)

    async def afind_system_messages(self, conversation_id: str) -> list[Message]:
        if not self._turn.holds(conversation_id):
            return await self._stored.afind_system_messages(conversation_id)
        ahead = self._turn.read_ahead
        if ahead is not None:
            return self._turn.system_messages(ahead.system)
        stored = await self._stored.afind_system_messages(conversation_id)
        return self._turn.system_messages(stored)
