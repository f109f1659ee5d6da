"""Session memory: the conversation as an append-only log, and the view a prompt is built from.

Spring AI 2.1 session memory (``Session``, ``SessionEvent``, ``SessionRepository``,
``InMemorySessionRepository``; docs "Session Memory" and "Compaction"). A session's log holds
messages, each at a **position** (1, 2, ... in the order appended; the Django store's
``ChatMessage.sequence``) and **boundary events**: a compaction appends a :class:`Boundary`
that says the messages up to ``covers_up_to`` left the view, with the summary that replaces
them in the prompt. Nothing is ever rewritten or deleted: the log stays complete, the view is
what a model sees.

The **view** (:class:`SessionView`) = the pinned system messages (stored ones; the request's
own system message is merged in by the advisor) + the newest boundary's summary + the messages
after the newest boundary, oldest first.

**Turns** (:func:`turn_starts`): a turn is a user message, the tool rounds that follow it (an
assistant message with tool calls and the tool responses that answer them) and the final reply.
A cut (the position a boundary covers up to) is only ever right before a user message that
starts a turn, and never while a tool call made before it still has a response after it: the
model never sees a tool response without its call, nor an answer without its question.

Divergences from Spring AI: events are messages plus boundaries (no branches, no other event
types, no session metadata object: the Django ``Conversation`` row is the session); the version
check of an append is the boundary's (``append_boundary(..., after=)``), since messages are
appended by the one turn that owns them (the turn pipeline serialises a conversation's writes).
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..messages import AssistantMessage, Message, MessageType, ToolResponseMessage, UserMessage
from .ids import check_conversation_id
from .repository import check_messages

__all__ = [
    "COMPACTION",
    "Boundary",
    "InMemorySessionRepository",
    "SessionRepository",
    "SessionView",
    "count_turns",
    "turn_starts",
]

#: The ``kind`` of a boundary written by a compaction (Spring AI's ``COMPACTION`` event).
COMPACTION = "compaction"


@dataclass(frozen=True, slots=True)
class Boundary:
    """A boundary event: the messages at positions ``<= covers_up_to`` left the view.

    ``summary`` replaces them in the prompt ("" for a plain window); ``model`` names the chat
    model that wrote it ("" for none); ``usage`` is that call's ``Usage.to_dict()`` (``None``:
    no call); ``created_at`` is an aware datetime (UTC).
    """

    covers_up_to: int
    summary: str = ""
    kind: str = COMPACTION
    model: str = ""
    usage: Mapping[str, Any] | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def __post_init__(self) -> None:
        if not isinstance(self.covers_up_to, int) or self.covers_up_to < 1:
            raise ValueError(f"covers_up_to must be a position >= 1, got {self.covers_up_to!r}")


@dataclass(frozen=True, slots=True)
class SessionView:
    """What the model sees of a session: pinned system messages, the newest boundary (its
    summary) and the messages after it with their log positions (same length, ascending).
    ``last_position`` is the newest position of the log (0: empty)."""

    system: tuple[Message, ...] = ()
    boundary: Boundary | None = None
    messages: tuple[Message, ...] = ()
    positions: tuple[int, ...] = ()
    last_position: int = 0

    @property
    def summary(self) -> str:
        return self.boundary.summary if self.boundary is not None else ""

    @property
    def covered(self) -> int:
        """The position the newest boundary covers up to (0: none)."""
        return self.boundary.covers_up_to if self.boundary is not None else 0

    def extended(self, messages: Sequence[Message]) -> SessionView:
        """The view once ``messages`` are appended (positions continue the log's)."""
        start = self.last_position
        positions = tuple(range(start + 1, start + 1 + len(messages)))
        return SessionView(
            self.system,
            self.boundary,
            (*self.messages, *messages),
            (*self.positions, *positions),
            start + len(messages),
        )


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indices in ``messages`` where a turn starts, i.e. where a boundary may cut.

    An index qualifies when its message is a user message and every tool call made before it
    is answered before it (or never): a cut there keeps each call with its responses. A call
    is answered by the first later response with its id (ids may repeat across turns). Linear.
    """
    open_calls: dict[str, int] = {}
    answered_at: dict[int, int] = {}  # index of a call message -> index of its last answer
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                open_calls[call.id] = index
        elif isinstance(message, ToolResponseMessage):
            for response in message.responses:
                at = open_calls.pop(response.id, None)
                if at is not None:
                    answered_at[at] = max(answered_at.get(at, -1), index)
    starts: list[int] = []
    reach = -1  # the last index answering a call made so far
    for index, message in enumerate(messages):
        if isinstance(message, UserMessage) and reach < index:
            starts.append(index)
        reach = max(reach, answered_at.get(index, -1))
    return starts


def count_turns(messages: Sequence[Message]) -> int:
    """How many turns ``messages`` hold (:func:`turn_starts`)."""
    return len(turn_starts(messages))


class SessionRepository:
    """Where sessions live (Spring AI ``SessionRepository``), async-first.

    ``aload_view`` reads the view; ``aappend`` adds a turn's messages at the end of the log, all
    or none; ``aappend_boundary`` records a compaction if the newest boundary still covers up to
    ``after`` (0: none) — else ``False``, nothing written (someone compacted meanwhile) — and
    refuses (``ValueError``) a boundary past the log's end; ``arequest_compaction`` is how a turn
    asks for a compaction after it: this default awaits ``run`` at once, a store with a task
    queue runs it later, elsewhere. Implementations must be safe to share between requests.
    """

    async def aload_view(self, conversation_id: str) -> SessionView:
        raise NotImplementedError

    async def aappend(self, conversation_id: str, messages: Sequence[Message]) -> None:
        raise NotImplementedError

    async def aappend_boundary(
        self, conversation_id: str, boundary: Boundary, *, after: int
    ) -> bool:
        raise NotImplementedError

    async def arequest_compaction(
        self, conversation_id: str, run: Callable[[], Awaitable[Any]]
    ) -> None:
        await run()


class _Log:
    __slots__ = ("boundaries", "messages")

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.boundaries: list[Boundary] = []


class InMemorySessionRepository(SessionRepository):
    """A thread-safe, process-local :class:`SessionRepository` for tests and single processes
    (Spring AI ``InMemorySessionRepository``). ``log(id)`` and ``boundaries(id)`` show all that
    was ever appended; nothing here blocks, so the async methods run inline."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[str, _Log] = {}

    def log(self, conversation_id: str) -> list[Message]:
        """Every message of the session, oldest first (position ``i`` at index ``i - 1``)."""
        with self._lock:
            found = self._logs.get(conversation_id)
            return list(found.messages) if found else []

    def boundaries(self, conversation_id: str) -> list[Boundary]:
        with self._lock:
            found = self._logs.get(conversation_id)
            return list(found.boundaries) if found else []

    async def aload_view(self, conversation_id: str) -> SessionView:
        check_conversation_id(conversation_id)
        with self._lock:
            found = self._logs.get(conversation_id)
            if found is None:
                return SessionView()
            boundary = found.boundaries[-1] if found.boundaries else None
            covered = boundary.covers_up_to if boundary else 0
            system = tuple(m for m in found.messages if m.message_type is MessageType.SYSTEM)
            pairs = [
                (position, message)
                for position, message in enumerate(found.messages, start=1)
                if position > covered and message.message_type is not MessageType.SYSTEM
            ]
            return SessionView(
                system,
                boundary,
                tuple(m for _, m in pairs),
                tuple(p for p, _ in pairs),
                len(found.messages),
            )

    async def aappend(self, conversation_id: str, messages: Sequence[Message]) -> None:
        check_conversation_id(conversation_id)
        batch = check_messages(messages)
        if not batch:
            return
        with self._lock:
            self._logs.setdefault(conversation_id, _Log()).messages.extend(batch)

    async def aappend_boundary(
        self, conversation_id: str, boundary: Boundary, *, after: int
    ) -> bool:
        check_conversation_id(conversation_id)
        with self._lock:
            found = self._logs.setdefault(conversation_id, _Log())
            newest = found.boundaries[-1].covers_up_to if found.boundaries else 0
            if newest != after:
                return False
            if boundary.covers_up_to > len(found.messages):
                raise ValueError(
                    f"a boundary covering up to position {boundary.covers_up_to} is past the "
                    f"end of the session ({len(found.messages)} messages)"
                )
            found.boundaries.append(boundary)
            return True
