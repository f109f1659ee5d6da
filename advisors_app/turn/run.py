"""Run a turn: the entry points every transport calls, and the ``run`` stage (call or stream).

:func:`call_turn` returns the turn's :class:`~advisors_app.turn.outcome.TurnOutcome`;
:func:`stream_turn` returns a :class:`TurnStream` of its :mod:`events <advisors_app.turn.events>`.
Both take the chain slug, the user and the turn — a :class:`~advisors_app.turn.input.TurnInput`
as a transport read it, or its fields as arguments — open it (:mod:`advisors_app.turn.open`: one
thread hop), run it and finish it (:mod:`advisors_app.turn.finish`: one thread hop, one
transaction). A transport already on a thread where database work may run — DRF's request checks
— opens the turn there with :func:`prepare_turn` and runs the :class:`PreparedTurn` it returns,
so the turn costs no hop of its own before it runs.

The ``run`` stage:

1. refuses a message that alone cannot fit the chat model's context window
   (``context_overflow``, HTTP 400, before the chain runs: a stream is refused before it opens;
   the call log says so, a conversation the turn started is removed). Every model call of the
   chain checks its whole prompt too (``core.context_window``): a prompt that grew past the
   window (history, retrieved context, a tool round) fails the turn with
   ``ContextOverflowError`` (``error_event`` code ``context_overflow``), stored as any failed
   turn: call log only;
2. runs the ``run`` hooks (:mod:`advisors_app.turn.stages`), then the chain — a call, or a
   stream whose events are ``start``, ``budget_warning``, ``guard``, ``sources``,
   ``tool_call_delta``, ``tool_call`` / ``tool_result``, ``delta``, then ``done`` or ``error`` —
   recording the per-advisor trace
   (``core.tracing.CallTrace``, plus OpenTelemetry spans), the last prompt that reached the
   model, each tool call as it starts and ends, and the sources retrieval found
   (:class:`~advisors_app.turn.sources.TurnSources`);
3. finishes the turn however the chain ended: completed, failed (``error``) or cancelled (the
   client left, ``aclose``, a cancelled task) — the partial reply is stored flagged as
   interrupted and the call log says cancelled.

A later turn of a chain with a memory advisor costs two thread hops and seven SQL statements in
two commits: version, conversation, window (one round trip), the user's message stored pending
(an asynchronous commit); sequence numbers, messages, call log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

from advisors_app.core.advisors.guard import GUARD_LISTENER
from advisors_app.core.aggregation import ChatClientResponseAccumulator
from advisors_app.core.context_window import check_context_window
from advisors_app.core.exceptions import ContextOverflowError
from advisors_app.core.messages import ToolCall
from advisors_app.core.prompt import Prompt, merge_options
from advisors_app.core.requests import ChatClientResponse
from advisors_app.core.streams import closing_stream
from advisors_app.core.tracing import CompositeObserver, OpenTelemetryObserver
from advisors_app.exceptions import TurnError
from advisors_app.models import CallLog
from advisors_app.security.redaction import redact
from advisors_app.turn import model_stream, stages
from advisors_app.turn.events import (
    ApprovalRequiredEvent,
    BudgetWarningEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    GuardEvent,
    ReasoningEvent,
    SourcesEvent,
    StartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
    error_event,
)
from advisors_app.turn.finish import finish, outcome_of
from advisors_app.turn.input import TurnInput
from advisors_app.turn.open import aopen_turn, open_turn
from advisors_app.turn.outcome import TurnOutcome
from advisors_app.turn.shutdown import turn_task_ended, turn_task_started
from advisors_app.turn.state import Turn

__all__ = ["PreparedTurn", "TurnStream", "call_turn", "prepare_turn", "stream_turn"]

_telemetry = OpenTelemetryObserver()


class _TurnRecorder:
    """Keeps what the turn's outcome reports besides the response: the (uncut) prompt of the
    last request that reached the model, the sources retrieval left in it, each tool call
    as it starts and ends, and each guard verdict as it is made (a stream also gets them as
    ``tool_call`` / ``tool_result`` / ``guard`` events, at once). It is the guard's listener:
    the request context holds :meth:`guard_verdict` under ``GUARD_LISTENER``."""

    def __init__(self, turn: Turn) -> None:
        self._turn = turn
        self._calls: dict[int, dict[str, Any]] = {}  # by the ToolCall object: ids may repeat
        turn.context[GUARD_LISTENER] = self.guard_verdict

    def _record(self, advisor: Any, request: Any) -> None:
        if getattr(advisor, "is_model_advisor", False):
            self._turn.final_prompt = request.prompt
            # Retrieval ran before the model's round: a stream sends its sources before that
            # round's tool events.
            self._turn.sources.note(request.context)

    def observe_call(self, advisor: Any, request: Any, proceed: Any) -> Any:
        self._record(advisor, request)
        return proceed(request)

    def observe_stream(self, advisor: Any, request: Any, proceed: Any) -> Any:
        self._record(advisor, request)
        chunks = proceed(request)
        if getattr(advisor, "is_model_advisor", False) and self._turn.tool_events is not None:
            # The tool loop holds chunks back: tool-call arguments and reasoning stream from here.
            return model_stream.watched(chunks, self._event)
        return chunks

    def _event(self, event: TurnEvent) -> None:
        queue = self._turn.tool_events
        if queue is not None:
            sources = self._turn.sources.take_unsent()
            if sources is not None:
                queue.put_nowait(SourcesEvent(sources))
            queue.put_nowait(event)

    def guard_verdict(self, verdict: Any) -> None:
        """A guard check flagged (or failed on) a text: kept for the outcome, and a ``guard``
        event — through the tool-event queue when there is one, else before the stream's next
        item."""
        turn = self._turn
        turn.guard.append(verdict.to_dict())
        event = GuardEvent(verdict.rail, verdict.check, verdict.action, verdict.failed)
        if turn.tool_events is not None:
            self._event(event)
        elif turn.mode == CallLog.Mode.STREAM:
            turn.pending_events.append(event)

    def tool_call_started(self, call: ToolCall) -> None:
        entry = {"id": call.id, "name": call.name, "arguments": call.arguments}
        entry.update(ok=None, error=None, duration_ms=None)
        self._calls[id(call)] = entry
        self._turn.tools.append(entry)
        self._turn.tool_started.append(time.perf_counter())
        self._event(ToolCallEvent(call.id, call.name, call.arguments))

    def tool_call_finished(
        self, call: ToolCall, ok: bool, error: str | None, duration: float
    ) -> None:
        duration_ms = round(duration * 1000, 3)
        error = redact(error) if error else error  # a tool's error text may quote a secret
        self._calls.pop(id(call), {}).update(ok=ok, error=error, duration_ms=duration_ms)
        self._event(ToolResultEvent(call.id, call.name, ok, error, duration_ms))


def _observer(turn: Turn) -> CompositeObserver:
    return CompositeObserver(_telemetry, turn.trace, _TurnRecorder(turn))


def _message_overflow(turn: Turn) -> ContextOverflowError | None:
    """The overflow the turn's message alone causes on the chain's model, else ``None``.

    A lower bound of every prompt of the turn: advisors add to it (system text, history,
    retrieved context, tools), so a message that does not fit here fits no model call. The
    check proper runs before every model call (``core.context_window``); this one only lets a
    hopeless turn be refused before anything runs — and a stream before it opens (HTTP 400
    rather than a 200 event stream ending in ``error``).
    """
    if not turn.message:
        return None
    client = turn.compiled.client
    options = merge_options(client.default_options, turn.options)
    try:
        check_context_window(client.chat_model, Prompt(turn.message, options))
    except ContextOverflowError as exc:
        return exc
    return None


async def _start(turn: Turn, mode: str) -> None:
    """The start of the ``run`` stage: refuse a message that cannot fit (after finishing the
    turn as a failed one: its call log is written, a conversation it started is removed),
    then the ``run`` hooks."""
    turn.mode = mode
    turn.started = time.perf_counter()
    overflow = _message_overflow(turn)
    if overflow is not None:
        turn.times.add(stages.Stage.RUN, turn.started)
        outcome = outcome_of(turn, CallLog.Status.ERROR, None)
        outcome = await finish(turn, outcome, None, overflow)
        raise TurnError(
            "context_overflow",
            str(overflow),
            http_status=400,
            trace_id=turn.trace_id,
            conversation_id=outcome.conversation_id,
        ) from overflow
    stages.run_hooks(stages.Stage.RUN, turn)


async def _call(turn: Turn) -> TurnOutcome:
    await _start(turn, CallLog.Mode.CALL)
    turn_task_started()
    try:
        spec = await turn.spec(_observer(turn)).acall()
        response = await spec.achat_client_response()
    except asyncio.CancelledError:
        turn.times.add(stages.Stage.RUN, turn.started)
        await finish(turn, outcome_of(turn, CallLog.Status.CANCELLED, None), None)
        raise
    except Exception as exc:
        turn.times.add(stages.Stage.RUN, turn.started)
        # The transports answer with the turn's conversation and trace id, as streams do.
        exc.turn_outcome = await finish(  # type: ignore[attr-defined]
            turn, outcome_of(turn, CallLog.Status.ERROR, None), None, exc
        )
        raise
    finally:
        turn_task_ended()
    turn.times.add(stages.Stage.RUN, turn.started)
    return await finish(turn, outcome_of(turn, CallLog.Status.OK, response), response)


class TurnStream:
    """The events of one streamed turn: ``async for event in stream`` (see ``events``).

    ``conversation_id``, ``conversation_title``, ``trace_id`` and ``chain`` are known before
    the first event.
    Stopping early — ``await stream.aclose()`` or cancelling the task that iterates — closes
    the model stream at once, stores the partial turn and writes the call log; the
    ``done`` event with ``reason="cancelled"`` cannot be yielded then, so it is left in
    ``final_event`` for the transport to send. After the stream ends, ``final_event`` is the
    last event (``done`` or ``error``) and ``exception`` the error the chain raised, if any.
    The final event's ``conversation_id`` is ``None`` when the turn started a conversation
    and stored nothing (it was removed); ``conversation_id`` here keeps the id ``start`` named.
    """

    def __init__(self, turn: Turn) -> None:
        self._turn = turn
        self.conversation_id = turn.conversation_id
        self.conversation_title = turn.title
        self.trace_id = turn.trace_id
        self.chain = turn.compiled.slug
        self.final_event: DoneEvent | ErrorEvent | None = None
        self.exception: BaseException | None = None
        #: Whether the turn still has to be finished (once, by whichever path ends it).
        self._unfinished = True
        self._events = self._run()
        #: The task that iterated last (registered as running a turn).
        self._task: asyncio.Task[Any] | None = None

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> TurnEvent:
        task = asyncio.current_task()
        if task is not self._task:
            self._task = task
            turn_task_started()
        return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop the turn (a no-op once it ended)."""
        await self._events.aclose()
        if self._unfinished:
            # Closed before the chain ran — before the first step, or at the ``start`` or a
            # ``budget_warning`` event: end it here as a cancel would (call log; the
            # conversation it started, still empty, is removed).
            self._unfinished = False
            turn = self._turn
            turn.times.add(stages.Stage.RUN, turn.started)
            outcome = outcome_of(turn, CallLog.Status.CANCELLED, None)
            # Kept should finishing be cancelled too; replaced once it is known what stayed.
            self.final_event = DoneEvent("cancelled", outcome)
            self.final_event = DoneEvent("cancelled", await finish(turn, outcome, None))

    async def __aenter__(self) -> TurnStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _run(self) -> AsyncIterator[TurnEvent]:
        turn = self._turn
        try:
            yield StartEvent(self.conversation_id, self.chain, self.trace_id, turn.target.number)
            meter = turn.meter
            for warning in meter.take_unsent_warnings():
                yield BudgetWarningEvent(warning.to_dict())
            accumulator = ChatClientResponseAccumulator()
            first: float | None = None
            tool_loop = turn.compiled.has_tool_loop  # its model stream is watched (model_stream)
            try:
                stream = turn.spec(_observer(turn)).stream().chat_client_responses()
                # Closed in reverse order: the tool-event reader stops reading ``chunks``
                # before ``chunks`` is closed.
                async with (
                    closing_stream(stream) as chunks,
                    closing_stream(_with_tool_events(turn, chunks)) as items,
                ):
                    async for item in items:
                        if turn.pending_events:
                            for event in _take(turn.pending_events):
                                yield event
                        if meter.unsent_warnings:
                            # A model round passed a soft limit: said before what follows.
                            for warning in meter.take_unsent_warnings():
                                yield BudgetWarningEvent(warning.to_dict())
                        if not isinstance(item, ChatClientResponse):
                            yield item
                            continue
                        accumulator.add(item)
                        # The chunk's text (inline: this runs for every chunk).
                        chat = item.chat_response
                        output = (
                            chat.generations[0].output
                            if chat is not None and chat.generations
                            else None
                        )
                        text = output.text if output is not None else ""
                        if output is not None and output.reasoning and not tool_loop:
                            yield ReasoningEvent(output.reasoning)  # else sent as it came
                        if text:
                            if first is None:
                                first = time.perf_counter() - turn.started
                                sources = _noted_sources(turn, item)
                                if sources is not None:
                                    yield sources
                            yield DeltaEvent(text)
            except (GeneratorExit, asyncio.CancelledError):
                turn.times.add(stages.Stage.RUN, turn.started)
                partial = accumulator.result()
                outcome = outcome_of(turn, CallLog.Status.CANCELLED, partial, first)
                # Kept should finishing be cancelled too; replaced once it is known what stayed.
                self.final_event = DoneEvent("cancelled", outcome)
                self._unfinished = False
                outcome = await finish(turn, outcome, partial)
                self.final_event = DoneEvent("cancelled", outcome)
                raise
            except Exception as exc:
                turn.times.add(stages.Stage.RUN, turn.started)
                partial = accumulator.result()
                self.exception = exc
                self.final_event = error_event(
                    exc, conversation_id=self.conversation_id, trace_id=self.trace_id
                )
                outcome = outcome_of(turn, CallLog.Status.ERROR, partial, first)
                self._unfinished = False
                outcome = await finish(turn, outcome, partial, exc)
                self.final_event = error_event(
                    exc, conversation_id=outcome.conversation_id, trace_id=self.trace_id
                )
                for event in _take(turn.pending_events):
                    yield event
                yield self.final_event
                return
            for event in _take(turn.pending_events):
                yield event
            aggregated = accumulator.result()
            sources = _noted_sources(turn, aggregated)
            if sources is not None:  # an answer without text still names its sources
                yield sources
            turn.times.add(stages.Stage.RUN, turn.started)
            outcome = outcome_of(turn, CallLog.Status.OK, aggregated, first)
            self._unfinished = False
            outcome = await finish(turn, outcome, aggregated)
            if outcome.pending_approvals:
                yield ApprovalRequiredEvent(outcome.pending_approvals)
            done = DoneEvent("complete", outcome)
            self.final_event = done
            yield done
        finally:
            turn_task_ended()


def _take(events: list[Any]) -> list[Any]:
    """The events of ``events``, which is emptied."""
    taken = events[:]
    events.clear()
    return taken


def _noted_sources(turn: Turn, chunk: ChatClientResponse) -> SourcesEvent | None:
    """The ``sources`` event due once ``chunk`` (a chunk's context from the first chunk on,
    a response's metadata on the last) is noted (``None``: none due)."""
    chat = chunk.chat_response
    turn.sources.note(chunk.context, chat.metadata if chat is not None else None)
    sources = turn.sources.take_unsent()
    return None if sources is None else SourcesEvent(sources)


_END = object()


def _with_tool_events(
    turn: Turn, chunks: AsyncIterator[ChatClientResponse]
) -> AsyncIterator[ChatClientResponse | TurnEvent]:
    """``chunks``, with the ``tool_call`` / ``tool_result`` events of the turn's tool rounds
    between them as they happen.

    A tool runs while the stream is between chunks, so for a chain with a tool loop the chunks
    are read by a task of their own and both arrive through one queue; for a chain without one
    this is ``chunks`` itself (no queue, no task, nothing per chunk).
    """
    if not turn.compiled.has_tool_loop:
        return chunks
    return _merged_tool_events(turn, chunks)


async def _merged_tool_events(
    turn: Turn, chunks: AsyncIterator[ChatClientResponse]
) -> AsyncIterator[ChatClientResponse | TurnEvent]:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    turn.tool_events = queue
    # The reader takes the next chunk only when the consumer asks for the next item, as
    # iterating ``chunks`` directly would: a consumer that stops after a chunk leaves the
    # model (and a memory advisor) exactly there, never a chunk further.
    wanted = asyncio.Event()

    async def pump() -> None:
        try:
            while True:
                await wanted.wait()
                wanted.clear()
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                queue.put_nowait(chunk)
        finally:
            queue.put_nowait(_END)

    # Created in this step's context, which the task keeps.
    task = asyncio.ensure_future(pump())
    try:
        wanted.set()
        while True:
            item = await queue.get()
            if item is _END:
                break
            yield item
            if isinstance(item, ChatClientResponse):  # the consumer asks for the next one
                wanted.set()
        await task  # raises what the stream raised
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait((task,))


async def _stream(turn: Turn) -> TurnStream:
    await _start(turn, CallLog.Mode.STREAM)
    return TurnStream(turn)


def _turn_input(
    message: str | TurnInput,
    conversation_id: str | None,
    params: Mapping[str, Any] | None,
    label: str | None,
    version: int | str | None,
) -> TurnInput:
    if isinstance(message, TurnInput):
        if (conversation_id, params, label, version) != (None, None, None, None):
            raise TypeError("Pass a TurnInput alone, or its fields, not both.")
        return message
    return TurnInput(message, conversation_id, params, label, version)


async def call_turn(
    chain: str,
    user: Any,
    message: str | TurnInput,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    version: int | str | None = None,
    trace_payloads: bool = False,
) -> TurnOutcome:
    """Run one turn through ``chain`` and return its outcome, the whole answer.

    The turn is ``message`` with the other fields, or a :class:`TurnInput` as a transport
    read it. ``trace_payloads`` keeps every advisor's request and response in the trace (the
    admin playground shows them), whatever ``ADVISORS["TRACE_PAYLOAD_SAMPLE"]`` says.

    Raises :class:`~advisors_app.exceptions.TurnError` for refused input (nothing stored), and
    whatever the chain raised, unchanged, when it failed, with the turn's outcome as its
    ``turn_outcome`` attribute (``error_event(exc)`` gives the payload transports send, with
    the conversation — ``None`` when the failed turn started it — and the trace id); the call
    log is written in every case but refused input.
    """
    data = _turn_input(message, conversation_id, params, label, version)
    return await _call(await aopen_turn(chain, user, data, trace_payloads=trace_payloads))


async def stream_turn(
    chain: str,
    user: Any,
    message: str | TurnInput,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    version: int | str | None = None,
) -> TurnStream:
    """Validate and open a turn (``message`` with the other fields, or a :class:`TurnInput`)
    and return its :class:`TurnStream`; the chain runs while iterating.

    Raises :class:`~advisors_app.exceptions.TurnError` for refused input before anything is
    stored (so a REST view can still answer 400 instead of opening an event stream). Errors
    of the chain arrive as one ``error`` event, never as an exception.
    """
    data = _turn_input(message, conversation_id, params, label, version)
    return await _stream(await aopen_turn(chain, user, data))


class PreparedTurn:
    """A turn checked and opened by :func:`prepare_turn`, not run yet: run it once, with
    :meth:`call` or :meth:`stream` (``RuntimeError`` the second time)."""

    __slots__ = ("_turn",)

    def __init__(self, turn: Turn) -> None:
        self._turn: Turn | None = turn

    def _take(self) -> Turn:
        turn, self._turn = self._turn, None
        if turn is None:
            raise RuntimeError("This turn has run already: prepare another.")
        return turn

    async def call(self) -> TurnOutcome:
        """Run the turn as :func:`call_turn` does."""
        return await _call(self._take())

    async def stream(self) -> TurnStream:
        """Run the turn as :func:`stream_turn` does."""
        return await _stream(self._take())


def prepare_turn(
    chain: str, user: Any, data: TurnInput, *, trace_payloads: bool = False
) -> PreparedTurn:
    """Blocking: check and open the turn of ``data`` (what :func:`call_turn` and
    :func:`stream_turn` do first, in their one thread hop), for a transport on a thread where
    database work may run already — DRF's request checks — so that the turn costs no hop of its
    own before it runs. Raises :class:`~advisors_app.exceptions.TurnError` as they do."""
    return PreparedTurn(open_turn(chain, user, data, trace_payloads=trace_payloads))
