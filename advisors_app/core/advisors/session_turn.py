"""``SessionTurnAdvisor``: one ``ChatClient`` call = one session turn, outside the tool loop.

Spring AI 2.1's ``SessionTurnAdvisor`` (docs "ChatClient Integration") works once per call,
outside the tool loop, so it sees the call's final response however the loop ended: it stores
the results of a loop that ended without a model round (return-direct tools) and compacts the
session once the call has returned. Here it also owns the turn's write, which is what makes a
turn atomic (see :mod:`~advisors_app.core.advisors.session_memory`):

1. read the session view once (the memory advisor inside the loop uses the same read);
2. **inline compaction first**: when ``context_window`` is known and the view plus the request
   would not fit in ``context_window * (1 - prompt_headroom)`` tokens minus the reply's
   ``max_tokens`` (the request's, else ``reserve_tokens``), compact now (forced), and once more
   keeping a single turn if that is still too much; a compaction that fails is logged and the
   turn goes on (a budget check, if any, refuses what still does not fit);
3. run the chain with a :class:`~advisors_app.core.advisors.session_memory.SessionTurn` in the
   context (:data:`~advisors_app.core.advisors.session_memory.SESSION_TURN`);
4. append the whole turn in one ``aappend``: its input as the caller sent it, each tool call
   with its results, the final reply (tool calls without results are answered "not executed";
   an approval pause is stored flagged ``approval_pending``); nothing if the call raised; an
   interrupted stream's input and partial reply flagged ``interrupted`` (nothing when no text
   came, as the 2.0 memory advisors);
5. evaluate the policy's trigger on the view after the turn and, if it fires, ask the
   repository for a compaction (``arequest_compaction``: the in-memory store runs it at once; the
   Django store queues a task that runs after the turn's transaction commits, so the user does
   not wait for it).

A host that stores the turn itself (a
:class:`~advisors_app.core.memory.turn.TurnMemory` for the conversation in the request context)
is handed step 4's messages and step 5's compaction request instead of the repository: it writes
the one with the rest of the turn and handles the other once the turn is stored.

Divergences from Spring AI: the turn is appended by this advisor, whole, rather than message by
message by the memory advisor (atomicity); registered alone (no ``SessionMemoryAdvisor`` inside)
it still stores the user input and the final reply, instead of nothing; the view is read once
per turn, not per model call; ``companions`` holds the ``SessionMemoryAdvisor`` that
:func:`session_advisors` made with it, so one registered configuration installs both.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any, ClassVar

from ..advisor import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    Advisor,
    CallAdvisor,
    MemoryAdvisor,
    StreamAdvisor,
)
from ..aggregation import ChatClientResponseAccumulator
from ..attributes import TRACE_ID
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..memory.compaction import CompactionPolicy, compact_session, view_tokens
from ..memory.ids import CANCELLED, ERROR, check_conversation_id
from ..memory.session import SessionRepository, SessionView
from ..memory.turn import turn_memory_of
from ..messages import Message, SystemMessage
from ..requests import ChatClientRequest, ChatClientResponse
from ..streams import closing_stream
from ..tokens import TiktokenTokenCountEstimator
from .session_memory import SESSION_TURN, SessionMemoryAdvisor, SessionTurn, conversation_id_of

__all__ = ["SessionTurnAdvisor", "session_advisors"]

logger = logging.getLogger(__name__)
_ESTIMATOR = TiktokenTokenCountEstimator()
_pending: set[asyncio.Task[Any]] = set()


class SessionTurnAdvisor(CallAdvisor, StreamAdvisor, MemoryAdvisor):
    """Reads the view, runs the turn, stores it whole, then asks for compaction.

    ``SessionTurnAdvisor(repository, policy=None, order=DEFAULT_ORDER, *, context_window=None,
    prompt_headroom=0.25, reserve_tokens=512, default_conversation_id=None, companions=())``.
    ``policy`` (a :class:`~advisors_app.core.memory.compaction.CompactionPolicy`; ``None``: never
    compacts) decides compaction after the turn; with ``context_window`` (tokens) it also
    compacts inline when the next prompt would not fit. ``DEFAULT_ORDER`` is the memory order
    (``HIGHEST_PRECEDENCE + 200``), outside the tool loop. Raises ``ValueError`` for a missing
    repository or conversation id and a request without new input.
    """

    DEFAULT_ORDER: ClassVar[int] = DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER
    AFTER_SIDE_EFFECTS: ClassVar[bool] = True

    def __init__(
        self,
        repository: SessionRepository,
        policy: CompactionPolicy | None = None,
        order: int = DEFAULT_ORDER,
        *,
        context_window: int | None = None,
        prompt_headroom: float = 0.25,
        reserve_tokens: int = 512,
        default_conversation_id: str | None = None,
        companions: tuple[Advisor, ...] = (),
    ) -> None:
        if repository is None:
            raise ValueError("sessionRepository cannot be null")
        if default_conversation_id is not None:
            check_conversation_id(default_conversation_id)
        if not 0 <= prompt_headroom < 1:
            raise ValueError(f"prompt_headroom must be >= 0 and < 1, got {prompt_headroom!r}")
        self.repository = repository
        self.policy = policy
        self._order = order
        self.context_window = context_window
        self.prompt_headroom = prompt_headroom
        self.reserve_tokens = reserve_tokens
        self.default_conversation_id = default_conversation_id
        self.companions = companions

    @property
    def name(self) -> str:
        return "SessionTurnAdvisor"

    # -- compaction ----------------------------------------------------------------------------

    def _reply_reserve(self, request: ChatClientRequest) -> int:
        return getattr(request.prompt.options, "max_tokens", None) or self.reserve_tokens

    def _limit(self, request: ChatClientRequest) -> int | None:
        if self.context_window is None:
            return None
        return int(self.context_window * (1 - self.prompt_headroom)) - self._reply_reserve(request)

    def _hard_limit(self, request: ChatClientRequest) -> int:
        """Tokens a prompt may have at all: the window minus the reply's reserve."""
        assert self.context_window is not None
        return self.context_window - self._reply_reserve(request)

    async def _fit(
        self, conversation_id: str, view: SessionView, request: ChatClientRequest
    ) -> SessionView:
        """The view, compacted first when it and the request would not fit (step 2)."""
        limit = self._limit(request)
        if self.policy is None or limit is None:
            return view
        own = _ESTIMATOR.estimate(list(request.prompt.instructions))
        if view_tokens(view) + own <= limit:
            return view
        if own > self._hard_limit(request):
            # The request alone cannot fit, whatever history is left: compacting would only
            # make the user wait and fold turns away for a turn the budget check refuses.
            return view
        strategies = [self.policy.strategy]
        if getattr(self.policy.strategy, "last_turns", 1) > 1:
            strategies.append(replace(self.policy.strategy, last_turns=1))  # type: ignore[type-var]
        for strategy in strategies:
            try:
                result = await compact_session(
                    self.repository, conversation_id, self.policy.trigger, strategy, force=True
                )
            except Exception:
                logger.exception("inline compaction of session %r failed", conversation_id)
                return view
            if not result.unchanged:
                view = await self.repository.aload_view(conversation_id)
            if view_tokens(view) + own <= limit:
                break
        return view

    async def compact(self, conversation_id: str, *, force: bool = False) -> Any:
        """Compact the session with this advisor's policy (``force``: whatever the trigger
        says); the ``CompactionResult``. ``ValueError`` without a policy."""
        if self.policy is None:
            raise ValueError("this SessionTurnAdvisor has no compaction policy")
        return await self.policy.compact(self.repository, conversation_id, force=force)

    async def _compact_quietly(self, conversation_id: str) -> None:
        try:
            await self.compact(conversation_id)
        except Exception:
            logger.exception("compaction of session %r failed", conversation_id)

    # -- the turn ------------------------------------------------------------------------------

    async def _start(self, request: ChatClientRequest) -> tuple[ChatClientRequest, SessionTurn]:
        if request is None:
            raise ValueError("chatClientRequest cannot be null")
        conversation_id = conversation_id_of(request.context, self.default_conversation_id)
        view = await self.repository.aload_view(conversation_id)
        view = await self._fit(conversation_id, view, request)
        held = turn_memory_of(request.context, conversation_id)
        turn = SessionTurn(conversation_id, view, request.context.get(TRACE_ID), held=held)
        conversation = [m for m in request.prompt.instructions if not isinstance(m, SystemMessage)]
        turn.new_input = turn.align(conversation)
        return request.mutate(context={SESSION_TURN: turn}), turn

    async def _store(self, turn: SessionTurn, messages: list[Message]) -> None:
        """Append the turn (step 4), then ask for a compaction if the trigger fires (step 5)."""
        if not messages:
            return
        await turn.store(self.repository, messages)
        policy = self.policy
        if policy is not None and policy.trigger.should_compact(turn.view.extended(messages)):
            conversation_id = turn.conversation_id

            async def run() -> None:
                await self._compact_quietly(conversation_id)

            if turn.held is not None:
                turn.held.request_compaction(self.repository, run)
            else:
                await self.repository.arequest_compaction(conversation_id, run)

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        advised, turn = await self._start(request)
        response = await chain.next_call(advised)
        await self._store(turn, turn.messages_to_store(response.chat_response))
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        advised, turn = await self._start(request)
        accumulator = ChatClientResponseAccumulator()
        try:
            async with closing_stream(chain.next_stream(advised)) as chunks:
                async for chunk in chunks:
                    accumulator.add(chunk)
                    yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            await self._store_interrupted(turn, accumulator, CANCELLED)
            raise
        except Exception:
            await self._store_interrupted(turn, accumulator, ERROR)
            raise
        await self._store(turn, turn.messages_to_store(accumulator.result().chat_response))

    async def _store_interrupted(
        self, turn: SessionTurn, accumulator: ChatClientResponseAccumulator, reason: str
    ) -> None:
        """Store the interrupted turn, shielded from a second cancel; never raises."""
        response = accumulator.result().chat_response
        partial = response.result.output.text if response and response.result else ""
        messages = turn.messages_to_store(None, reason, partial)
        if not messages or turn.held is not None:
            await turn.store(self.repository, messages)  # held: nothing to wait for
            return
        task = asyncio.ensure_future(self.repository.aappend(turn.conversation_id, messages))
        _pending.add(task)
        task.add_done_callback(_stored)
        # The caller re-raises its own exception, which matters more than a failed store.
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.shield(task)


def _stored(task: asyncio.Task[Any]) -> None:
    _pending.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("could not store an interrupted session turn", exc_info=task.exception())


def session_advisors(
    repository: SessionRepository,
    policy: CompactionPolicy | None = None,
    *,
    turn_order: int = SessionTurnAdvisor.DEFAULT_ORDER,
    memory_order: int = SessionMemoryAdvisor.DEFAULT_ORDER,
    summary_placement: str = "system",
    **options: Any,
) -> tuple[SessionTurnAdvisor, SessionMemoryAdvisor]:
    """Both session advisors on one repository (Spring AI ``SessionAdvisors.builder``): the
    turn advisor (outside the loop; ``options`` go to it) and the memory advisor (inside;
    ``summary_placement`` goes to it)."""
    memory = SessionMemoryAdvisor(
        repository,
        memory_order,
        default_conversation_id=options.get("default_conversation_id"),
        summary_placement=summary_placement,
    )
    turn = SessionTurnAdvisor(repository, policy, turn_order, companions=(memory,), **options)
    return turn, memory
