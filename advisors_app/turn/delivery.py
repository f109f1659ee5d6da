"""What the SSE view and the websocket share when they deliver a turn.

* **Fewer, larger ``delta`` events** (:class:`DeltaCoalescer`): coalescing a turn's streamed text;
* **the end of a cancelled turn** (:func:`cancelled_frames`): what a turn stopped before its
  final event still sends — the text held back, then its ``done`` with ``reason: cancelled``;
  stopped by the server shutting down (:func:`shutdown_frames`): the text held back, then an
  ``error`` with code ``server_shutdown``;
* **a detached turn** (:func:`detach`): with ``ADVISORS["DISCONNECT_POLICY"] = "continue"`` a
  turn whose client went away runs on to its end, stored whole (:func:`keeps_running`);
* **resume checks** (:func:`resume_errors`, :func:`nothing_to_resume`): what a request to resume
  a conversation's last turn must say, and the refusal when nothing of it is kept.

Coalescing. A model that streams one token per chunk would cost one websocket frame (or SSE
event) per token: for a long answer thousands of frames, each with its JSON envelope, its send
and its client-side render. :class:`DeltaCoalescer` merges the ``delta`` events of a turn's
event stream (:mod:`advisors_app.turn.events`) under a simple rule:

* the **first** piece of text goes out as soon as it arrives (the time to first token is never
  made worse);
* after that, text arriving within ``interval`` seconds of the previous emission is held and
  merged; the held text goes out when ``interval`` has passed since that emission (a timer: it
  does not wait for the next token), when it reaches ``max_chars`` characters, or right before
  any other event (``done``, ``error``);
* text is never lost, split differently in a way that matters (the concatenation of the
  emitted texts is the concatenation of the source's texts) or reordered; non-delta events
  keep their order.

So a slow stream (a token every 100 ms with ``interval`` 0.04) passes through untouched, and a
fast one (a token every 2 ms) costs one event per ``interval`` or per ``max_chars``.
``interval=0`` turns coalescing off. Settings: ``ADVISORS["STREAM_COALESCE_MS"]`` and
``["STREAM_COALESCE_CHARS"]`` (:mod:`advisors_app.conf`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping
from typing import TYPE_CHECKING, Any

from advisors_app.conf import app_settings
from advisors_app.exceptions import TurnError
from advisors_app.memory.conversations import conversation_id_errors
from advisors_app.turn.events import DeltaEvent, DoneEvent, TurnEvent, server_shutdown_event
from advisors_app.turn.outcome import TurnOutcome
from advisors_app.validation import FieldErrors

if TYPE_CHECKING:
    from advisors_app.turn.run import TurnStream

__all__ = [
    "MAX_EVENT_ID_LENGTH",
    "DeltaCoalescer",
    "cancelled_frames",
    "detach",
    "keeps_running",
    "nothing_to_resume",
    "resume_errors",
    "shutdown_frames",
]


async def _step(source: AsyncIterator[TurnEvent]) -> TurnEvent:
    return await anext(source)


class DeltaCoalescer:
    """An async iterator over ``source``'s events with its deltas merged (module docstring).

    ``interval`` is in seconds, ``max_chars`` in characters; both default to the settings.
    While text is held, the next event of ``source`` is awaited in a task of its own, so the
    timer can fire without disturbing it; otherwise ``source`` is awaited directly, and a
    cancellation of the iterating task reaches it as usual.

    To stop early (cancel, disconnect) call :meth:`aclose`: it stops the pending step and
    closes ``source`` (for a :class:`~advisors_app.turn.run.TurnStream`: the model stream is
    closed and the partial turn stored), after which :meth:`take_pending_text` returns the text
    that had arrived but was not emitted yet, so a transport can still send it.
    """

    def __init__(
        self,
        source: AsyncIterator[TurnEvent],
        *,
        interval: float | None = None,
        max_chars: int | None = None,
    ) -> None:
        self._source = source
        self._interval = (
            app_settings.STREAM_COALESCE_MS / 1000 if interval is None else max(interval, 0.0)
        )
        self._max_chars = app_settings.STREAM_COALESCE_CHARS if max_chars is None else max_chars
        self._held: list[str] = []
        self._held_chars = 0
        self._ready: list[TurnEvent] = []  # events to emit once the held text has gone out
        self._pending: asyncio.Future[TurnEvent] | None = None
        self._last_emit: float | None = None
        self._exhausted = False

    def __aiter__(self) -> DeltaCoalescer:
        return self

    async def __anext__(self) -> TurnEvent:
        if self._ready:
            return self._ready.pop(0)
        loop = asyncio.get_running_loop()
        while not self._exhausted:
            event = await self._next_source_event(loop)
            if event is None:  # the timer fired, or the source ended
                break
            if not isinstance(event, DeltaEvent):
                if self._held:
                    self._ready.append(event)
                    return self._emit_held(loop)
                return event
            self._held.append(event.text)
            self._held_chars += len(event.text)
            if (
                self._last_emit is None
                or self._held_chars >= self._max_chars
                or loop.time() - self._last_emit >= self._interval
            ):
                return self._emit_held(loop)
        if self._held:
            return self._emit_held(loop)
        raise StopAsyncIteration

    async def _next_source_event(self, loop: asyncio.AbstractEventLoop) -> TurnEvent | None:
        """The next event; ``None`` when the held text fell due first or the source ended."""
        if not self._held and self._pending is None:
            try:
                return await anext(self._source)
            except StopAsyncIteration:
                self._exhausted = True
                return None
        if self._pending is None:
            self._pending = asyncio.ensure_future(_step(self._source))
        timeout = None
        if self._held:
            assert self._last_emit is not None
            timeout = max(self._last_emit + self._interval - loop.time(), 0.0)
        done, _ = await asyncio.wait((self._pending,), timeout=timeout)
        if not done:
            return None
        pending, self._pending = self._pending, None
        try:
            return pending.result()
        except StopAsyncIteration:
            self._exhausted = True
            return None

    def _emit_held(self, loop: asyncio.AbstractEventLoop) -> DeltaEvent:
        self._last_emit = loop.time()
        return DeltaEvent(self.take_pending_text())

    def take_pending_text(self) -> str:
        """The text received but not emitted yet (and forget it); ``""`` when none."""
        text = "".join(self._held)
        self._held.clear()
        self._held_chars = 0
        return text

    async def aclose(self) -> None:
        """Stop: cancel the pending step, keep any text it had already produced, close ``source``.

        Events other than deltas that arrive this way are dropped: a closed turn's final
        event is the source's business (``TurnStream.final_event``).
        """
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.cancel()
            await asyncio.wait((pending,))
            if not pending.cancelled() and pending.exception() is None:
                event = pending.result()
                if isinstance(event, DeltaEvent):
                    self._held.append(event.text)
                    self._held_chars += len(event.text)
        self._exhausted = True
        self._ready.clear()
        close: Any = getattr(self._source, "aclose", None)
        if close is not None:
            await close()


def cancelled_frames(
    stream: TurnStream | None, events: DeltaCoalescer | None, chain: str
) -> list[dict[str, Any]]:
    """The frames that end a turn of ``chain`` stopped before it sent its final event (a
    ``cancel``, a client gone): the text ``events`` held back, then the stream's final event —
    or, for a turn cancelled before it was set up (``stream`` ``None``: nothing ran, nothing
    stored), a ``done`` with ``reason: cancelled`` saying so. Call it once ``events`` is closed
    (:meth:`DeltaCoalescer.aclose`: the turn is then finished and stored)."""
    frames = []
    rest = events.take_pending_text() if events is not None else ""
    if rest:
        frames.append(DeltaEvent(rest).to_dict())
    final = stream.final_event if stream is not None else None
    if final is None:
        trace_id = stream.trace_id if stream is not None else ""
        outcome = TurnOutcome("cancelled", None, "", None, {}, None, trace_id, chain)
        final = DoneEvent("cancelled", outcome)
    frames.append(final.to_dict())
    return frames


def shutdown_frames(
    stream: TurnStream | None, events: DeltaCoalescer | None
) -> list[dict[str, Any]]:
    """The frames that end a turn the server stopped as it shut down
    (:func:`advisors_app.turn.shutdown.stopping`): the text ``events`` held back, then the
    ``error`` event with code ``server_shutdown`` naming the conversation as the turn left it
    (``None``: a first turn that stored nothing). Call it once ``events`` is closed."""
    frames = []
    rest = events.take_pending_text() if events is not None else ""
    if rest:
        frames.append(DeltaEvent(rest).to_dict())
    conversation_id = trace_id = None
    if stream is not None:
        trace_id = stream.trace_id
        final = stream.final_event
        conversation_id = (
            final.outcome.conversation_id
            if isinstance(final, DoneEvent)
            else stream.conversation_id
        )
    frames.append(server_shutdown_event(conversation_id, trace_id).to_dict())
    return frames


def keeps_running() -> bool:
    """Whether a turn goes on when its client goes away (``DISCONNECT_POLICY = "continue"``)
    instead of being cancelled and stored as interrupted."""
    return app_settings.DISCONNECT_POLICY == "continue"


#: Turns left running by a client that went away: a strong reference, so the event loop does not
#: drop them before they end.
_DETACHED: set[asyncio.Task[Any]] = set()


def detach(task: asyncio.Task[Any]) -> None:
    """Let ``task`` — a turn whose client went away — run on to its end (:func:`keeps_running`),
    stored whole, its events still published."""
    _DETACHED.add(task)
    task.add_done_callback(_DETACHED.discard)


#: Longer than any event id a turn makes (``"<32 hex digits>-<n>"``): a longer one is refused,
#: not parsed (its number could be thousands of digits).
MAX_EVENT_ID_LENGTH = 64


def resume_errors(data: Mapping[str, Any], fields: Collection[str]) -> FieldErrors:
    """What is wrong with a request to resume a conversation's last turn: ``conversation_id``
    must name it (a conversation id as a turn takes it:
    :func:`~advisors_app.memory.conversations.conversation_id_errors`), ``last_event_id``
    (when sent) be an event id or ``null``; other fields than
    ``fields`` (the transport's own, which it checks) are unknown. ``{}``: nothing."""
    conversation_id = data.get("conversation_id")
    if conversation_id is None:
        errors: FieldErrors = {"conversation_id": ["Name the conversation to resume."]}
    else:  # checked as a turn's: an id no turn could have made is refused, whatever its size
        errors = conversation_id_errors(conversation_id)
    last = data.get("last_event_id")
    if last is not None and (not isinstance(last, str) or len(last) > MAX_EVENT_ID_LENGTH):
        errors["last_event_id"] = ["Expected the id of an event (a string) or null."]
    for name in sorted(set(data) - {"conversation_id", *fields}):
        errors[name] = ["Unknown field."]
    return errors


def nothing_to_resume(conversation_id: str) -> TurnError:
    """The refusal of a resume when no turn of ``conversation_id`` is kept (404 ``not_found``;
    another user's conversation is unknown)."""
    return TurnError(
        "not_found",
        "No turn of this conversation is kept to resume: reload the conversation.",
        http_status=404,
        conversation_id=conversation_id,
    )
