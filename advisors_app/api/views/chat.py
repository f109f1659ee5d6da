"""Chat endpoints: ``call`` (one JSON answer) and ``stream`` (Server-Sent Events).

Both hand the request to the turn (:mod:`advisors_app.turn`): DRF's checks run in a worker
thread, and the turn is opened there too (:func:`~advisors_app.turn.prepare_turn`), so it costs
no thread hop of its own before it runs; the handler then runs the
:class:`~advisors_app.turn.PreparedTurn` (``call()`` or ``stream()``) and translates. Nothing
here builds a chain or writes a message. Refused input (blank or oversized message, unknown
chain, bad params or filter) is a 4xx JSON error before anything is stored; the stream endpoint
validates before it opens the stream, so a refusal is never a 200 event stream.

SSE: each event is ``id: <event id>``, ``event: <type>`` and ``data: <json>`` (the event's
``to_dict()`` with its ``event_id``, exactly the websocket frame) followed by a blank line.
The events are published to the turn buffer and the user's sockets
(:mod:`advisors_app.turn.buffer`); a client that lost the stream posts
``{"conversation_id", "resume": true}`` with the ``Last-Event-ID`` header and gets the events
it missed, then the rest as they come. Under ASGI the response body is an async
generator. When the client goes away Django cancels the task serving the request
(``ASGIHandler`` listens for ``http.disconnect`` while the response streams): the
generator cancels the task iterating the turn, and its ``CancelledError`` lands inside the
turn, which closes the model stream at once, stores the partial reply flagged as interrupted
and logs the turn as cancelled; if it lands while a chunk is being sent, closing the generator
cancels that task the same way. The end of such a turn (its held-back text, its ``done``) is
published for a client that resumes, as the websocket's is
(:func:`~advisors_app.turn.delivery.cancelled_frames`). A turn stopped by the server shutting
down ends its stream with the text held back and an ``error`` event, code ``server_shutdown``
(:func:`~advisors_app.turn.delivery.shutdown_frames`); the server waits for it to be sent.

A stream silent for ``ADVISORS["SSE_KEEPALIVE_SECONDS"]`` (a slow model, a long tool round)
gets a ``: keep-alive`` comment line, which SSE clients ignore and proxies count as traffic.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.exceptions import NotAcceptable
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import JSONParser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.mediatypes import media_type_matches

from advisors_app.api.base import AsyncAPIView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.serializers import ChatRequestSerializer, ChatResultSerializer
from advisors_app.conf import app_settings
from advisors_app.exceptions import TurnError
from advisors_app.security.rates import ResumeRateThrottle, count_request
from advisors_app.turn import PreparedTurn, TurnInput, TurnStream, prepare_turn
from advisors_app.turn.buffer import TurnPublisher, turn_buffer
from advisors_app.turn.delivery import (
    DeltaCoalescer,
    cancelled_frames,
    detach,
    keeps_running,
    nothing_to_resume,
    resume_errors,
    shutdown_frames,
)
from advisors_app.turn.events import TurnEvent
from advisors_app.turn.shutdown import delivering, stopping

__all__ = [
    "KEEPALIVE",
    "TURN_ERRORS",
    "ChainCallView",
    "ChainStreamView",
    "JSONOnlyNegotiation",
    "TurnView",
    "resumed_frames",
    "sse_event",
    "sse_events",
    "sse_frame",
    "turn_frames",
]

#: The refusals of a turn's request, documented on every view that runs one.
TURN_ERRORS = {
    400: OpenApiResponse(ErrorSerializer, description="Refused input (code invalid)."),
    401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
    404: OpenApiResponse(ErrorSerializer, description="No enabled chain with this slug."),
    406: OpenApiResponse(
        ErrorSerializer,
        description="The Accept header admits neither JSON nor, for the stream, "
        "text/event-stream (code not_acceptable).",
    ),
    415: OpenApiResponse(ErrorSerializer, description="The body is not JSON."),
    429: OpenApiResponse(
        ErrorSerializer,
        description="Too many turns (code throttled), a used-up budget (code "
        "budget_exceeded, with reset_at) or the provider's rate limit (code rate_limited, "
        "provider_status 429); see Retry-After.",
    ),
}
_CALL_FAILURES = {
    500: OpenApiResponse(ErrorSerializer, description="internal_error or chain_misconfigured."),
    502: OpenApiResponse(ErrorSerializer, description="The provider failed or answered badly."),
    503: OpenApiResponse(ErrorSerializer, description="The provider is unavailable."),
    504: OpenApiResponse(ErrorSerializer, description="The provider timed out."),
}

SSE_DESCRIPTION = """\
Runs one turn and streams it as Server-Sent Events (`text/event-stream`). Each event is
`event: <type>` and `data: <JSON>` followed by a blank line; the JSON is identical to the
websocket frame and holds `"type"` too. A stream is `start`, `sources` (when retrieval ran),
`tool_call_delta` while the model streams a call's arguments, `tool_call` and `tool_result` for
each call of each tool round, any number of `delta`, then
exactly one `done` or `error`:

- `start`: `{"type": "start", "conversation_id", "chain", "trace_id", "version"}` — `version`
  is the number of the chain version that runs (null: the draft)
- `sources`: `{"type": "sources", "sources": [{"document_id", "title", "source", "score",
  "snippet", "retrieval"}]}` — the documents retrieval found, before the first `delta`
- `tool_call_delta`: `{"type": "tool_call_delta", "id", "name", "arguments_delta"}` — the
  model streams a tool call's arguments (before its `tool_call`)
- `tool_call`: `{"type": "tool_call", "id", "name", "arguments"}` — a tool starts to run
  (`arguments`: the JSON text the model sent)
- `tool_result`: `{"type": "tool_result", "id", "name", "ok", "error", "duration_ms"}` — it
  ended (`error`: the text the model received instead of a result)
- `budget_warning`: `{"type": "budget_warning", "budget", "spent", "limit", "currency",
  "percent", "reset_at", "over_limit"}` — a budget counting this turn is past its soft limit
  (right after `start`, or when a model round crosses it)
- `guard`: `{"type": "guard", "rail", "check", "action", "failed"}` — a guard check flagged a
  text of the turn (the input, a retrieved document, a tool's arguments or result, the answer)
  and took `action` (docs/guards.md)
- `delta`: `{"type": "delta", "text"}` — the next piece of the answer (coalesced as on the
  websocket: the first piece at once, then at most one event per `STREAM_COALESCE_MS` or
  `STREAM_COALESCE_CHARS`)
- `done`: `{"type": "done", "reason": "complete", "conversation_id", "message_id", "stored",
  "content", "usage": {"prompt_tokens", "completion_tokens", "total_tokens"} | null,
  "metadata", "finish_reason", "finish_category", "trace_id", "version", "sources", "tools",
  "timings":
  {"latency_ms", "time_to_first_token_ms"}, "pending_approvals", "cost": {"input", "output",
  "total", "currency", "price_source"}, "budget_warnings", "guard", "experiment"?}` — the
  same body as `call` answers with (cost amounts are decimal strings, null when a price is
  unknown);
  `message_id` is the stored reply's id; a turn
  that stored nothing (a guard refused the message) has `"stored": false` and `"message_id":
  null`, and `"conversation_id": null` when it was the conversation's first turn (the
  conversation `start` named was removed)
- `error`: `{"type": "error", "code", "message", "provider_status", "retry_after", "errors",
  "conversation_id", "trace_id"}` — the turn failed after it started (codes as in the error
  body: rate_limited, provider_timeout, provider_unavailable, ..., budget_exceeded — with
  `reset_at` —, internal_error); `conversation_id` is null when it was a first turn that
  stored nothing

Refused input is answered before the stream opens, with a JSON error and a 4xx status — as
is a turn whose budget is used up already (429 `budget_exceeded`).
While the turn is silent (a slow model, a tool round), a `: keep-alive` comment line is sent
every `ADVISORS["SSE_KEEPALIVE_SECONDS"]` (default 15); SSE clients ignore comments.
Every event has an `id:` line, its `event_id` (`<trace_id>-<n>`). Resume a lost stream with
`{"conversation_id", "resume": true}` and the `Last-Event-ID` header: the events after that id
of the conversation's last turn, then the rest live (404 `not_found` when none is kept; 429
`throttled` past `ADVISORS["RESUME_THROTTLE_RATE"]` resumes per user).
Closing the connection stops the model at once; the partial answer is stored flagged as
interrupted and the call log says cancelled (with `ADVISORS["DISCONNECT_POLICY"] = "continue"`
the turn runs on to its end and is stored whole). Use `curl -N` to see events as they come.
"""

_SSE_EXAMPLE = (
    'event: start\ndata: {"type": "start", "conversation_id": "7f9c...", "chain": "support", '
    '"trace_id": "4be1...", "version": 3}\n\n'
    'event: delta\ndata: {"type": "delta", "text": "Hel"}\n\n'
    'event: delta\ndata: {"type": "delta", "text": "lo!"}\n\n'
    'event: done\ndata: {"type": "done", "reason": "complete", "conversation_id": "7f9c...", '
    '"message_id": 42, "stored": true, "content": "Hello!", "usage": null, "metadata": {}, '
    '"finish_reason": "STOP", "finish_category": "stop", "trace_id": "4be1...", "version": 3, '
    '"sources": [], "tools": [], '
    '"timings": {"latency_ms": 412.5, "time_to_first_token_ms": 88.1}}\n\n'
)


def sse_event(event: TurnEvent) -> str:
    """One Server-Sent Event: ``event: <type>``, ``data: <json>``, blank line."""
    return sse_frame(event.to_dict())


def sse_frame(frame: dict[str, Any]) -> str:
    """One Server-Sent Event of a frame: ``id: <event_id>`` (when it has one), ``event: <type>``,
    ``data: <json>``, blank line."""
    data = json.dumps(frame, ensure_ascii=False, separators=(",", ":"))
    event_id = frame.get("event_id")
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {frame['type']}\ndata: {data}\n\n"


SSE_KEEPALIVE = ": keep-alive\n\n"
#: What :func:`turn_frames` and :func:`resumed_frames` yield while the turn is silent: the
#: transport's keep-alive (an SSE comment line).
KEEPALIVE = object()
_END = object()


async def sse_events(
    stream: TurnStream, publisher: TurnPublisher | None = None
) -> AsyncIterator[str]:
    """The turn's events as SSE text (:func:`turn_frames`, each frame :func:`sse_frame`)."""
    async with contextlib.aclosing(turn_frames(stream, publisher)) as frames:
        async for frame in frames:
            yield SSE_KEEPALIVE if frame is KEEPALIVE else sse_frame(frame)


async def turn_frames(stream: TurnStream, publisher: TurnPublisher | None = None) -> Any:
    """The turn's events as frames (``to_dict()``), deltas coalesced as on the websocket
    (:class:`~advisors_app.turn.delivery.DeltaCoalescer`), with :data:`KEEPALIVE` while it is
    silent; closing or cancelling it stops the turn (see module) — unless
    ``ADVISORS["DISCONNECT_POLICY"]`` is ``"continue"``: then the turn runs on to its end and
    is stored whole. With ``publisher``
    each event gets its id and is published (buffer, the user's sockets), so a client can
    resume it. Every stream transport (SSE, the AG-UI and AI SDK protocols) encodes these."""
    interval = app_settings.SSE_KEEPALIVE_SECONDS or None
    queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=1)  # the turn runs at most one event ahead
    detached = False
    loop = asyncio.get_running_loop()
    last_event = loop.time()

    async def put(item: Any) -> None:
        nonlocal last_event
        if not detached:
            await queue.put(item)
            last_event = loop.time()

    async def keep_alive() -> None:
        # Says the stream is alive once it has been silent for ``interval``: a timer of its own,
        # so waiting for an event costs no timeout (no task) per event.
        nonlocal last_event
        assert interval is not None
        while True:
            await asyncio.sleep(max(last_event + interval - loop.time(), 0.0))
            if loop.time() - last_event >= interval and queue.empty():
                queue.put_nowait(KEEPALIVE)
                last_event = loop.time()

    async def pump() -> None:
        final_sent = False
        events = DeltaCoalescer(stream)  # as the websocket: fewer, larger deltas
        try:
            async for event in events:
                frame = event.to_dict()
                final_sent = event is stream.final_event
                await put(publisher.stamp(frame) if publisher is not None else frame)
            await put(_END)
        except Exception as exc:  # an event stream failing is relayed, not swallowed
            await put(exc)
        except asyncio.CancelledError:
            if not stopping() or final_sent:
                raise
            # The server stopped the turn (stored): the stream ends with its error event.
            await events.aclose()
            for frame in shutdown_frames(stream, events):
                await put(publisher.stamp(frame) if publisher is not None else frame)
            final_sent = True
            await put(_END)
        finally:
            await events.aclose()
            if publisher is not None:
                if not final_sent:  # cancelled: its end goes to the buffer, for a resume
                    for frame in cancelled_frames(stream, events, stream.chain):
                        publisher.stamp(frame)
                await publisher.drain()

    # One task iterates the turn from start to end, so its context variables and its
    # cancellation stay in one place; a keep-alive timeout here only stops waiting on the queue.
    turn = asyncio.create_task(pump())
    delivering()  # a server shutting down waits for this response to send its last event
    alive = asyncio.create_task(keep_alive()) if interval is not None else None
    try:
        while True:
            item = await queue.get()
            if item is _END:
                return
            if isinstance(item, Exception):
                raise item
            yield item
    finally:
        if alive is not None:
            alive.cancel()
        if keeps_running() and not turn.done():
            detached = True
            while not queue.empty():  # unblocks a pending put; later ones are skipped
                queue.get_nowait()
            detach(turn)
        else:
            turn.cancel()  # a no-op once the turn has ended; else it stops the model at once
            with contextlib.suppress(asyncio.CancelledError):
                await turn


async def resumed_events(user: Any, conversation_id: str, last_event_id: str | None) -> Any:
    """The frames of the conversation's last turn after ``last_event_id`` as SSE text, then the
    rest as they come, with keep-alive comments; ``None`` when no turn is kept."""
    frames = await resumed_frames(user, conversation_id, last_event_id)
    if frames is None:
        return None

    async def events() -> AsyncIterator[str]:
        async with contextlib.aclosing(frames) as kept:
            async for frame in kept:
                yield SSE_KEEPALIVE if frame is KEEPALIVE else sse_frame(frame)

    return events()


async def resumed_frames(user: Any, conversation_id: str, last_event_id: str | None) -> Any:
    """The frames of the conversation's last turn after ``last_event_id``, then the rest as
    they come, with :data:`KEEPALIVE` while it is silent; ``None`` when no turn is kept."""
    buffer = turn_buffer()
    if await buffer.read(user.pk, conversation_id) is None:
        return None
    interval = app_settings.SSE_KEEPALIVE_SECONDS or None

    async def events() -> AsyncIterator[Any]:
        frames = buffer.follow(user.pk, conversation_id, last_event_id)
        step: asyncio.Future[dict[str, Any]] | None = None
        try:
            while True:
                step = asyncio.ensure_future(anext(frames))
                while not (await asyncio.wait((step,), timeout=interval))[0]:
                    yield KEEPALIVE
                try:
                    frame = step.result()
                except StopAsyncIteration:
                    return
                yield frame
        finally:
            if step is not None and not step.done():
                step.cancel()
                await asyncio.wait((step,))
            await frames.aclose()

    return events()


class JSONOnlyNegotiation(BaseContentNegotiation):
    """The chat views' negotiation: answers are JSON (a refusal, a call's reply) or the view's
    own ``media_types`` (the stream's ``text/event-stream``) — DRF would answer a stream client
    that sends ``Accept: text/event-stream`` 406 when its turn is refused, as it knows no
    renderer for it. An ``Accept`` that admits none of them (``text/html`` alone, say) is 406
    ``not_acceptable``, before the turn is opened; none, or ``*/*``, takes the usual answer."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0]

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None) -> Any:
        view = request.parser_context.get("view") if request.parser_context else None
        offered = (renderers[0].media_type, *getattr(view, "media_types", ()))
        header = request.META.get("HTTP_ACCEPT", "")
        if header.strip() and not _accepts(header, offered):
            raise NotAcceptable(
                detail=f"This endpoint answers {' or '.join(offered)}; the Accept header "
                f"{header[:200]!r} admits none of them."
            )
        return renderers[0], renderers[0].media_type


def _accepts(header: str, offered: tuple[str, ...]) -> bool:
    """Whether the ``Accept`` header admits one of ``offered`` (a range with ``q=0`` does
    not)."""
    for item in header.split(","):
        media_range, *params = (part.strip() for part in item.split(";"))
        if any(p.replace(" ", "") in ("q=0", "q=0.0", "q=0.00", "q=0.000") for p in params):
            continue
        if media_range and any(media_type_matches(kind, media_range) for kind in offered):
            return True
    return False


class TurnView(AsyncAPIView):
    """A view that runs a turn on ``POST``: JSON in, DRF's checks, then the turn opened in the
    same worker thread. The chat views and the stream-protocol views
    (:mod:`advisors_app.api.views.protocols`) share it, so they share authentication,
    permissions, CSRF and the turn's own checks."""

    parser_classes = [JSONParser]
    renderer_classes = [JSONRenderer]
    content_negotiation_class = JSONOnlyNegotiation
    # Chat turns are throttled by the turn, after validation (advisors_app.turn.throttling).
    throttle_classes: list[Any] = []
    #: The turn of a ``POST``, checked and opened while DRF's checks ran (:meth:`_prepare`).
    turn: PreparedTurn | None = None

    def _prepare(self, request: Request, *args: Any, **kwargs: Any) -> None:
        """DRF's checks, then the turn's own (:func:`~advisors_app.turn.prepare_turn`) in the
        same worker thread: a turn costs no thread hop of its own before it runs."""
        super()._prepare(request, *args, **kwargs)
        if request.method != "POST":
            return
        if self._starts_turn(request.data):
            data = self._turn_input(request.data)
            self.turn = prepare_turn(kwargs["slug"], request.user, data)
        else:
            self._check_resume(request)

    def _starts_turn(self, data: Any) -> bool:
        return True

    def _check_resume(self, request: Request) -> None:
        """A request that resumes a turn instead of running one: checked by the view that
        takes it, in DRF's worker thread."""

    def _turn_input(self, data: Any) -> TurnInput:
        """The turn the body asks for; a stream protocol's view translates its own body."""
        return TurnInput.from_data(data)

    @staticmethod
    def _sse(events: AsyncIterator[str]) -> StreamingHttpResponse:
        response = StreamingHttpResponse(events, content_type="text/event-stream; charset=utf-8")
        # Proxies and browsers must pass each event on at once (nginx honours the header).
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


class ChainCallView(TurnView):
    """``POST /api/chains/<slug>/call/``: run one turn and answer with the whole reply."""

    @extend_schema(
        operation_id="chains_call",
        tags=["chat"],
        summary="Run one chat turn",
        description="Runs the chain on the message and answers with the whole reply. "
        "Provider failures answer 429/502/503/504 with the provider's status and message.",
        request=ChatRequestSerializer,
        responses={200: ChatResultSerializer, **TURN_ERRORS, **_CALL_FAILURES},
    )
    async def post(self, request: Request, slug: str) -> Response:
        assert self.turn is not None
        outcome = await self.turn.call()
        return Response(outcome.to_dict())


def _resumes(data: Any) -> bool:
    """Whether a stream request asks to resume a turn instead of running one (``resume`` set
    to anything: :meth:`ChainStreamView._resume` says what it must be)."""
    return isinstance(data, dict) and "resume" in data


class ChainStreamView(TurnView):
    """``POST /api/chains/<slug>/stream/``: run one turn as Server-Sent Events."""

    #: What it answers besides JSON (:class:`JSONOnlyNegotiation`).
    media_types = ("text/event-stream",)

    def _starts_turn(self, data: Any) -> bool:
        return not _resumes(data)

    def _check_resume(self, request: Request) -> None:
        """Refuse a malformed resume (400), then count it against
        ``ADVISORS["RESUME_THROTTLE_RATE"]`` (429 ``throttled`` past it): found or not, as the
        websocket's ``resume`` frames (:mod:`advisors_app.security.rates`)."""
        data = request.data
        errors = resume_errors(data, ("resume",))
        if data["resume"] is not True:
            errors["resume"] = ["Send true to resume a turn (leave it out to run one)."]
        if errors:
            raise TurnError("invalid", "The request is invalid.", errors=errors)
        count_request(ResumeRateThrottle, request.user)

    @extend_schema(
        operation_id="chains_stream",
        tags=["chat"],
        summary="Run one chat turn as Server-Sent Events",
        description=SSE_DESCRIPTION,
        request=ChatRequestSerializer,
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="start, delta..., then done or error (see above).",
                examples=[OpenApiExample("A short answer", value=_SSE_EXAMPLE)],
            ),
            **TURN_ERRORS,
            500: OpenApiResponse(ErrorSerializer, description="chain_misconfigured."),
        },
    )
    async def post(self, request: Request, slug: str) -> Any:
        data = request.data
        if _resumes(data):
            return await self._resume(request, data)
        assert self.turn is not None
        stream = await self.turn.stream()
        publisher = TurnPublisher(request.user, stream.conversation_id, stream.trace_id)
        return self._sse(sse_events(stream, publisher))

    async def _resume(self, request: Request, data: dict[str, Any]) -> Any:
        """``{"conversation_id", "resume": true}`` + ``Last-Event-ID``: the missed events, then
        the rest live; 404 ``not_found`` when no turn of the conversation is kept (another
        user's conversation is unknown). Checked and counted already (:meth:`_check_resume`)."""
        conversation_id = data["conversation_id"]
        last_event_id = request.headers.get("Last-Event-ID") or None
        events = await resumed_events(request.user, conversation_id, last_event_id)
        if events is None:
            raise nothing_to_resume(conversation_id)
        return self._sse(events)
