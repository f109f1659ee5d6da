"""``ChatMemory`` and its window implementations (Spring AI ``ChatMemory``,
``MessageWindowChatMemory``), plus a token-budget window Spring AI lacks.

Design (divergence from Spring AI, defects 5.3.18 and 5.3.19): the repository keeps the whole
transcript and the window is applied when reading. ``add`` appends the new messages only
(O(batch), atomic, no lost updates under concurrency) instead of re-reading, trimming and
rewriting the conversation; ``get`` reads the newest messages only, O(window) whatever the
conversation's length (O(newest turn) in the rare case that turn alone exceeds the window).

``history_for(id, messages)`` (not in Spring AI) is what a memory advisor reads: the window
aligned with a request that may carry history of its own (:mod:`.history`), in the same single
read as ``get`` (it reads at least as many messages as the request has).

``for_turn(turn_memory)`` (not in Spring AI) is the memory a turn whose host stores it reads and
writes (:mod:`.turn`): the window memories read the messages the host read ahead and hold their
appends there; a ``ChatMemory`` of your own is used as it is.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Iterable, Sequence

from ..messages import Message, MessageType, SystemMessage
from ..tokens import TiktokenTokenCountEstimator, TokenCountEstimator
from .history import RequestHistory, align_request
from .ids import check_conversation_id
from .in_memory import InMemoryChatMemoryRepository
from .repository import ChatMemoryRepository, check_messages
from .turn import TurnMemory
from .window import drop_orphan_tool_responses, window_positions

__all__ = [
    "DEFAULT_MAX_MESSAGES",
    "ChatMemory",
    "MessageWindowChatMemory",
    "TokenWindowChatMemory",
]

#: Spring AI ``ChatMemory``'s message for a missing or blank id (``Assert.hasText``).
_NULL_OR_EMPTY = "conversationId cannot be null or empty"

#: Spring AI ``MessageWindowChatMemory.DEFAULT_MAX_MESSAGES``.
DEFAULT_MAX_MESSAGES = 20


def _as_list(message_or_messages: Message | Iterable[Message] | None) -> list[Message]:
    if message_or_messages is None:
        raise ValueError("messages cannot be null")
    if hasattr(message_or_messages, "message_type"):
        return [message_or_messages]  # type: ignore[list-item]
    return check_messages(message_or_messages)


class ChatMemory:
    """The messages a model should see for a conversation (Spring AI ``ChatMemory``).

    ``add(id, message_or_messages)``, ``get(id)`` and ``clear(id)`` have async twins ``aadd``,
    ``aget`` and ``aclear``; advisors use the twins. The twins run the sync methods in a worker
    thread unless an implementation overrides them. ``history_for``/``ahistory_for`` (not in
    Spring AI) align ``get`` with a request's own messages; this default treats the result of
    ``get`` as the newest stored messages, window implementations compare with the transcript.
    """

    def add(self, conversation_id: str, message_or_messages: Message | Iterable[Message]) -> None:
        raise NotImplementedError

    def get(self, conversation_id: str) -> list[Message]:
        raise NotImplementedError

    def clear(self, conversation_id: str) -> None:
        raise NotImplementedError

    async def aadd(
        self, conversation_id: str, message_or_messages: Message | Iterable[Message]
    ) -> None:
        await asyncio.to_thread(self.add, conversation_id, message_or_messages)

    async def aget(self, conversation_id: str) -> list[Message]:
        return await asyncio.to_thread(self.get, conversation_id)

    async def aclear(self, conversation_id: str) -> None:
        await asyncio.to_thread(self.clear, conversation_id)

    def history_for(self, conversation_id: str, messages: Sequence[Message]) -> RequestHistory:
        """What memory holds for a request with ``messages``: the system messages, the history
        to put before the request, and the request's messages to store (:mod:`.history`)."""
        return _aligned(self.get(conversation_id), messages)

    async def ahistory_for(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> RequestHistory:
        return _aligned(await self.aget(conversation_id), messages)

    def for_turn(self, turn: TurnMemory) -> ChatMemory:
        """This memory as the turn ``turn`` holds its conversation (see :mod:`.turn`): reading
        what the host read ahead and holding its appends for the host. This default returns the
        memory itself, which reads and writes its own store as it goes."""
        return self


def _aligned(stored: Sequence[Message], messages: Sequence[Message]) -> RequestHistory:
    """:func:`align_request` with the window standing in for the newest stored messages."""
    window = [m for m in stored if not _is_system(m)]
    history, new = align_request(window, range(len(window)), _conversation(messages))
    system = tuple(m for m in stored if isinstance(m, SystemMessage))
    return RequestHistory(system, tuple(history), tuple(new))


def _conversation(messages: Sequence[Message]) -> list[Message]:
    return [m for m in check_messages(messages) if not _is_system(m)]


def _is_system(message: Message) -> bool:
    return message.message_type is MessageType.SYSTEM


def _system_update(batch: list[Message], current: Sequence[Message]) -> tuple[list[Message], bool]:
    """The batch to append and whether it replaces the stored system messages."""
    new_systems = [m for m in batch if _is_system(m) and m not in current]
    if not new_systems:
        # Every system message of the batch is already stored: storing it again would only
        # duplicate it (Spring AI appends the copy).
        return [m for m in batch if not _is_system(m)], False
    deduplicated: list[Message] = []
    for message in batch:
        if not (_is_system(message) and message in deduplicated):
            deduplicated.append(message)
    return deduplicated, True


class _WindowChatMemory(ChatMemory):
    """A ``ChatMemory`` over a repository that windows the transcript when reading.

    System messages: a batch holding a system message that is not stored yet replaces every
    stored system message (Spring AI's rule); one that is already stored is not stored twice.
    ``get`` returns the stored system messages first, then the window of the other messages
    (:func:`~advisors_app.core.memory.window.select_window`). System messages are never counted
    against the budget and never evicted.
    """

    #: How many messages the first read of ``get`` asks for; later reads double it.
    _first_read: int

    def __init__(self, repository: ChatMemoryRepository | None) -> None:
        self._repository = InMemoryChatMemoryRepository() if repository is None else repository

    @property
    def repository(self) -> ChatMemoryRepository:
        """The repository holding the whole transcript (e.g. for showing full conversations)."""
        return self._repository

    def for_turn(self, turn: TurnMemory) -> ChatMemory:
        """A copy of this memory over ``turn.repository(self.repository)``: the same window,
        answered from the turn's read-ahead, its appends held for the host."""
        held = copy.copy(self)
        held._repository = turn.repository(self._repository)
        return held

    @property
    def first_read(self) -> int:
        """How many of the newest messages a turn's first read asks the repository for (a
        repository that reads ahead for a turn needs no more)."""
        return self._first_read

    def _budget(self) -> int:
        raise NotImplementedError

    def _cost_function(self) -> Callable[[Message], int]:
        raise NotImplementedError

    def _positions(
        self, tail: list[Message], limit: int, cost: Callable[[Message], int]
    ) -> list[int] | None:
        return window_positions(tail, self._budget(), cost, complete=len(tail) < limit)

    def add(self, conversation_id: str, message_or_messages: Message | Iterable[Message]) -> None:
        """Append the messages to the conversation (O(batch)); an empty batch does nothing."""
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        batch = _as_list(message_or_messages)
        if not batch:
            return
        replace = False
        if any(_is_system(m) for m in batch):
            current = self._repository.find_system_messages(conversation_id)
            batch, replace = _system_update(batch, current)
        if batch:
            self._repository.append(conversation_id, batch, replace_system=replace)

    def get(self, conversation_id: str) -> list[Message]:
        """The stored system messages, then the window of the conversation, oldest first."""
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        system = self._repository.find_system_messages(conversation_id)
        tail, positions = self._read(conversation_id, 0)
        return [*system, *_window(tail, positions)]

    def _read(self, conversation_id: str, reach: int) -> tuple[list[Message], list[int]]:
        """The newest ``max(reach, first read)`` messages or more, and the window's positions."""
        cost = self._cost_function()
        limit = max(self._first_read, reach)
        while True:
            tail = self._repository.find_last(conversation_id, limit)
            positions = self._positions(tail, limit, cost)
            if positions is not None:
                return tail, positions
            limit *= 2

    def history_for(self, conversation_id: str, messages: Sequence[Message]) -> RequestHistory:
        """What memory holds for a request with ``messages`` (see :mod:`.history`).

        One read of the newest messages, as many as the window needs and at least as many as
        the request has, so that history the request carries is recognised even when the
        window skips part of it.
        """
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        conversation = _conversation(messages)
        system = self._repository.find_system_messages(conversation_id)
        tail, positions = self._read(conversation_id, len(conversation))
        history, new = align_request(tail, positions, conversation)
        return RequestHistory(tuple(system), tuple(history), tuple(new))

    def clear(self, conversation_id: str) -> None:
        """Forget the conversation (``repository.delete_by_conversation_id``)."""
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        self._repository.delete_by_conversation_id(conversation_id)

    async def aadd(
        self, conversation_id: str, message_or_messages: Message | Iterable[Message]
    ) -> None:
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        batch = _as_list(message_or_messages)
        if not batch:
            return
        replace = False
        if any(_is_system(m) for m in batch):
            current = await self._repository.afind_system_messages(conversation_id)
            batch, replace = _system_update(batch, current)
        if batch:
            await self._repository.aappend(conversation_id, batch, replace_system=replace)

    async def aget(self, conversation_id: str) -> list[Message]:
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        system = await self._repository.afind_system_messages(conversation_id)
        tail, positions = await self._aread(conversation_id, 0)
        return [*system, *_window(tail, positions)]

    async def _aread(self, conversation_id: str, reach: int) -> tuple[list[Message], list[int]]:
        cost = self._cost_function()
        limit = max(self._first_read, reach)
        while True:
            tail = await self._repository.afind_last(conversation_id, limit)
            positions = self._positions(tail, limit, cost)
            if positions is not None:
                return tail, positions
            limit *= 2

    async def ahistory_for(
        self, conversation_id: str, messages: Sequence[Message]
    ) -> RequestHistory:
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        conversation = _conversation(messages)
        system = await self._repository.afind_system_messages(conversation_id)
        tail, positions = await self._aread(conversation_id, len(conversation))
        history, new = align_request(tail, positions, conversation)
        return RequestHistory(tuple(system), tuple(history), tuple(new))

    async def aclear(self, conversation_id: str) -> None:
        check_conversation_id(conversation_id, none_message=_NULL_OR_EMPTY)
        await self._repository.adelete_by_conversation_id(conversation_id)


def _window(tail: list[Message], positions: list[int]) -> list[Message]:
    return drop_orphan_tool_responses([tail[i] for i in positions])


def _one(message: Message) -> int:
    return 1


class MessageWindowChatMemory(_WindowChatMemory):
    """Keeps the newest whole turns within ``max_messages`` (Spring AI ``MessageWindowChatMemory``).

    ``repository`` defaults to a new :class:`InMemoryChatMemoryRepository`; ``max_messages``
    (default 20) counts non-system messages; ``max_messages <= 0`` raises
    ``ValueError("maxMessages must be greater than 0")``.

    Divergences, each a fix (reference §5.3): the transcript is kept whole and the window
    applied when reading (defect 19); a conversation that fits is returned whole, an opening
    assistant greeting included (issue 17); a trimmed window keeps whole turns, starts at a user
    message, never keeps a tool response without its call, and never empties a conversation
    whose newest turn fits (defect 18, bug case B08); system messages are returned first and
    are neither counted nor evicted, and re-adding a stored one does not duplicate it; message
    equality ignores metadata (defect 16).
    """

    def __init__(
        self,
        repository: ChatMemoryRepository | None = None,
        max_messages: int = DEFAULT_MAX_MESSAGES,
    ) -> None:
        if not isinstance(max_messages, int) or isinstance(max_messages, bool) or max_messages <= 0:
            raise ValueError("maxMessages must be greater than 0")
        super().__init__(repository)
        self.max_messages = max_messages
        # One more than the window: enough to see where the budget is exceeded.
        self._first_read = max_messages + 1

    def _budget(self) -> int:
        return self.max_messages

    def _cost_function(self) -> Callable[[Message], int]:
        return _one

    def __repr__(self) -> str:
        return f"MessageWindowChatMemory(max_messages={self.max_messages})"


class TokenWindowChatMemory(_WindowChatMemory):
    """Keeps the newest whole turns whose messages fit in ``max_tokens`` tokens.

    Not in Spring AI (users ask for it). Tokens are counted per message with
    ``token_count_estimator`` (default
    :class:`~advisors_app.core.tokens.TiktokenTokenCountEstimator`: ``cl100k_base`` text tokens
    plus per-message overhead, tool-call names/arguments and tool-response data). The budget
    covers the conversation history only: system messages are neither counted nor evicted.
    When the newest turn alone exceeds the budget the window keeps its user message and the
    longest tail of the turn that fits; a user message alone over budget yields no history.
    Window rules as in :class:`MessageWindowChatMemory`. ``max_tokens <= 0`` raises
    ``ValueError("maxTokens must be greater than 0")``.
    """

    #: Messages read first; reads double until the budget is exceeded or the start is reached.
    FIRST_READ = 32

    def __init__(
        self,
        repository: ChatMemoryRepository | None = None,
        *,
        max_tokens: int,
        token_count_estimator: TokenCountEstimator | None = None,
    ) -> None:
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens <= 0:
            raise ValueError("maxTokens must be greater than 0")
        super().__init__(repository)
        self.max_tokens = max_tokens
        self.token_count_estimator = token_count_estimator or TiktokenTokenCountEstimator()
        self._first_read = self.FIRST_READ

    def _budget(self) -> int:
        return self.max_tokens

    def _cost_function(self) -> Callable[[Message], int]:
        # Re-reads after doubling see the same messages again; equal messages cost the same.
        estimate = self.token_count_estimator.estimate
        cache: dict[Message, int] = {}

        def cost(message: Message) -> int:
            tokens = cache.get(message)
            if tokens is None:
                tokens = cache[message] = estimate(message)
            return tokens

        return cost

    def __repr__(self) -> str:
        return f"TokenWindowChatMemory(max_tokens={self.max_tokens})"
