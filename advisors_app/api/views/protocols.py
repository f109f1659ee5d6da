"""The turn over other stream protocols: ``POST /api/chains/<slug>/ag-ui/`` (AG-UI) and
``POST /api/chains/<slug>/ai-sdk/`` (the Vercel AI SDK's UI message stream).

Each is the SSE stream view's machinery (:class:`~advisors_app.api.views.chat.TurnView`:
authentication, permissions, CSRF, the turn checked and opened in DRF's worker thread; the turn's
frames with keep-alives, published for a resume, stopped when the client goes away) with the
body read and the frames encoded by :mod:`advisors_app.protocols`. Refused input is a 4xx JSON
error before the stream opens, its field errors named as the protocol's body names them.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.serializers.protocols import AgUiRunSerializer, AiSdkChatSerializer
from advisors_app.api.views.chat import (
    KEEPALIVE,
    SSE_KEEPALIVE,
    TURN_ERRORS,
    TurnView,
    resumed_frames,
    turn_frames,
)
from advisors_app.exceptions import Refusal
from advisors_app.protocols import ag_ui, ai_sdk
from advisors_app.protocols.common import invalid, rename_fields
from advisors_app.turn import TurnInput
from advisors_app.turn.buffer import TurnPublisher, parse_event_id, turn_buffer
from advisors_app.turn.delivery import nothing_to_resume, resume_errors

__all__ = ["ChainAgUiView", "ChainAiSdkStreamView", "ChainAiSdkView"]


class _ProtocolView(TurnView):
    #: What it answers besides JSON (refusals): the protocol's events (``JSONOnlyNegotiation``).
    media_types = ("text/event-stream",)
    #: The turn's field names → the protocol body's, for the turn's field errors.
    field_names: Mapping[str, str] = {}

    def _prepare(self, request: Request, *args: Any, **kwargs: Any) -> None:
        try:
            super()._prepare(request, *args, **kwargs)
        except Refusal as exc:
            exc.fields = rename_fields(exc.fields, self.field_names)
            raise


def _stream_responses(description: str, example: str) -> dict[Any, Any]:
    return {
        (200, "text/event-stream"): OpenApiResponse(
            OpenApiTypes.STR,
            description=description,
            examples=[OpenApiExample("A short answer", value=example)],
        ),
        **TURN_ERRORS,
        404: OpenApiResponse(ErrorSerializer, description="No enabled chain with this slug, or "
                             "(a resume) no turn of the thread is kept."),
        500: OpenApiResponse(ErrorSerializer, description="chain_misconfigured."),
    }  # fmt: skip


AG_UI_DESCRIPTION = """\
Runs one turn as an AG-UI run (protocol 1.0) over Server-Sent Events: a `RunAgentInput` in
(`threadId` is the conversation, the last message — the user's — the turn's message,
`forwardedProps` may carry `params`, `label`, `version`), AG-UI events out: `RUN_STARTED`,
`TEXT_MESSAGE_START`/`CONTENT`/`END`, `TOOL_CALL_START`/`ARGS`/`END`/`RESULT`, `CUSTOM`
(`sources`, `budget_warning`), then `RUN_FINISHED` (outcome `success`, `interrupt` or
`cancelled`) or `RUN_ERROR`. A turn paused for tool-call approval ends with the interrupt
outcome (one interrupt per waiting call, `reason: "tool_call"`); resume with a new run on the
thread whose `resume` answers each (`{"approved": true}`, `{"approved": true, "editedArgs"}`,
`{"approved": false, "reason"}`; `status: "cancelled"` rejects). Every event has the `id:` of
the turn event it came from: a client that lost the stream posts the same body with the
`Last-Event-ID` header and gets the rest of that run (404 `not_found` when none is kept).
Refused input is a JSON error before the stream opens. See docs/protocols.md.
"""

_AG_UI_EXAMPLE = (
    'id: 4be1...-1\ndata: {"type":"RUN_STARTED","threadId":"support-42","runId":"run-1",'
    '"protocolVersion":"1.0"}\n\n'
    'id: 4be1...-2\ndata: {"type":"TEXT_MESSAGE_START","messageId":"4be1...-text-1",'
    '"role":"assistant"}\n\n'
    'data: {"type":"TEXT_MESSAGE_CONTENT","messageId":"4be1...-text-1","delta":"Hello!"}\n\n'
    'id: 4be1...-3\ndata: {"type":"TEXT_MESSAGE_END","messageId":"4be1...-text-1"}\n\n'
    'data: {"type":"RUN_FINISHED","threadId":"support-42","runId":"run-1",'
    '"outcome":{"type":"success"}}\n\n'
)


class ChainAgUiView(_ProtocolView):
    """``POST /api/chains/<slug>/ag-ui/``: one turn as an AG-UI run (see the module)."""

    field_names = ag_ui.FIELD_NAMES
    run: ag_ui.AgUiRun | None = None

    def _starts_turn(self, data: Any) -> bool:
        return not self.request.headers.get("Last-Event-ID")

    def _turn_input(self, data: Any) -> TurnInput:
        self.run = ag_ui.run_input(data)
        return self.run.turn

    @extend_schema(
        operation_id="chains_ag_ui",
        tags=["chat"],
        summary="Run one chat turn as an AG-UI run (Server-Sent Events)",
        description=AG_UI_DESCRIPTION,
        request=AgUiRunSerializer,
        responses=_stream_responses("AG-UI events (see above).", _AG_UI_EXAMPLE),
    )
    async def post(self, request: Request, slug: str) -> Any:
        last_event_id = request.headers.get("Last-Event-ID")
        if last_event_id:
            return await self._resume(request, last_event_id)
        assert self.turn is not None and self.run is not None
        stream = await self.turn.stream()
        publisher = TurnPublisher(request.user, stream.conversation_id, stream.trace_id)
        run = self.run
        events = ag_ui.AgUiEvents(run.thread_id, run.run_id, run.resumed, run.rejected)
        return self._sse(_ag_ui_sse(turn_frames(stream, publisher), events))

    async def _resume(self, request: Request, last_event_id: str) -> Any:
        """The same body and ``Last-Event-ID``: the rest of the thread's last run. Its frames
        are translated from the first (the translation keeps state: an open text message),
        and sent from after ``last_event_id`` on."""
        run = ag_ui.run_input(request.data)
        errors = resume_errors({"conversation_id": run.thread_id}, ())
        if errors:
            raise invalid(rename_fields(errors, ag_ui.FIELD_NAMES))
        frames = await resumed_frames(request.user, run.thread_id, None)
        if frames is None:
            raise nothing_to_resume(run.thread_id)
        events = ag_ui.AgUiEvents(run.thread_id, run.run_id, run.resumed, run.rejected)
        return self._sse(_ag_ui_sse(frames, events, after=last_event_id))


async def _ag_ui_sse(
    frames: Any, events: ag_ui.AgUiEvents, after: str | None = None
) -> AsyncIterator[str]:
    """The AG-UI events of ``frames`` as SSE text; with ``after``, only those of the frames
    that came after that event id (of the same turn)."""
    seen = parse_event_id(after)
    async with contextlib.aclosing(frames) as kept:
        async for frame in kept:
            if frame is KEEPALIVE:
                yield SSE_KEEPALIVE
                continue
            translated = events.translate(frame)
            event_id = frame.get("event_id")
            current = parse_event_id(event_id)
            if seen and current and current[0] == seen[0] and current[1] <= seen[1]:
                continue  # the client had it
            if translated:
                yield "".join(ag_ui.encode(event, event_id) for event in translated)


AI_SDK_DESCRIPTION = """\
Runs one turn as a Vercel AI SDK UI message stream (protocol v1, header
`x-vercel-ai-ui-message-stream: v1`): the body `useChat` sends in (`id` is the conversation,
the last user message's text parts the turn's message; `params`, `label`, `version` may be
added), Server-Sent Events `data: <part>` out: `start`, `text-start`/`text-delta`/`text-end`,
`tool-input-start`/`tool-input-available`, `tool-output-available` (or `tool-output-error`),
`source-document` for each retrieved document, `data-budget-warning`, `tool-approval-request`
for a call waiting for approval (answer with `addToolApprovalResponse`: the next request
resumes the turn), `error`, then `finish` and `data: [DONE]`. Refused input is a JSON error
before the stream opens. See docs/protocols.md.
"""

_AI_SDK_EXAMPLE = (
    'data: {"type":"start","messageId":"4be1...","messageMetadata":{"conversation_id":'
    '"chat-42","chain":"support","trace_id":"4be1...","version":3}}\n\n'
    'data: {"type":"text-start","id":"4be1...-text-1"}\n\n'
    'data: {"type":"text-delta","id":"4be1...-text-1","delta":"Hello!"}\n\n'
    'data: {"type":"text-end","id":"4be1...-text-1"}\n\n'
    'data: {"type":"finish","finishReason":"stop","messageMetadata":{...}}\n\n'
    "data: [DONE]\n\n"
)


class ChainAiSdkView(_ProtocolView):
    """``POST /api/chains/<slug>/ai-sdk/``: one turn as a UI message stream (see the module)."""

    field_names = ai_sdk.FIELD_NAMES
    chat: ai_sdk.AiSdkChat | None = None

    def _turn_input(self, data: Any) -> TurnInput:
        self.chat = ai_sdk.chat_input(data)
        return self.chat.turn

    @extend_schema(
        operation_id="chains_ai_sdk",
        tags=["chat"],
        summary="Run one chat turn as an AI SDK UI message stream (Server-Sent Events)",
        description=AI_SDK_DESCRIPTION,
        request=AiSdkChatSerializer,
        responses=_stream_responses("UI message stream parts (see above).", _AI_SDK_EXAMPLE),
    )
    async def post(self, request: Request, slug: str) -> Any:
        assert self.turn is not None and self.chat is not None
        stream = await self.turn.stream()
        publisher = TurnPublisher(request.user, stream.conversation_id, stream.trace_id)
        parts = ai_sdk.UiMessageParts(self.chat.resumed, self.chat.rejected)
        response = self._sse(_ai_sdk_sse(turn_frames(stream, publisher), parts))
        for name, value in ai_sdk.HEADERS.items():
            response[name] = value
        return response


async def _ai_sdk_sse(frames: Any, parts: ai_sdk.UiMessageParts) -> AsyncIterator[str]:
    """The parts of ``frames`` as SSE text, then ``[DONE]`` once the turn ended."""
    async with contextlib.aclosing(frames) as kept:
        async for frame in kept:
            if frame is KEEPALIVE:
                yield SSE_KEEPALIVE
                continue
            translated = parts.translate(frame)
            if translated:
                yield "".join(ai_sdk.encode(part) for part in translated)
    yield ai_sdk.DONE


class ChainAiSdkStreamView(TurnView):
    """``GET /api/chains/<slug>/ai-sdk/<chat id>/stream/``: ``useChat``'s reconnect
    (``resume: true``) — the chat's running turn, from its start, then live; 204 when none runs
    (its last turn ended, none is kept, or the chat is another user's)."""

    media_types = ("text/event-stream",)

    @extend_schema(
        operation_id="chains_ai_sdk_stream",
        tags=["chat"],
        summary="Reconnect to a chat's running turn (AI SDK UI message stream)",
        description="`useChat`'s `resume: true`: the parts of the chat's turn that is still "
        "running, from its `start`, then the rest live, then `[DONE]`; 204 when no turn of the "
        "chat runs (point `prepareReconnectToStreamRequest` here: see docs/protocols.md).",
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR, description="UI message stream parts, as the POST sends them."
            ),
            204: OpenApiResponse(description="No turn of the chat is running."),
            400: TURN_ERRORS[400],
            401: TURN_ERRORS[401],
        },
    )
    async def get(self, request: Request, slug: str, chat_id: str) -> Any:
        errors = resume_errors({"conversation_id": chat_id}, ())
        if errors:
            raise invalid(rename_fields(errors, ai_sdk.FIELD_NAMES))
        kept = await turn_buffer().read(request.user.pk, chat_id)
        if not kept or kept[-1].get("type") in ("done", "error"):
            return Response(status=204)  # an ended turn is in the chat's stored messages
        frames = await resumed_frames(request.user, chat_id, None)
        if frames is None:  # forgotten meanwhile
            return Response(status=204)
        response = self._sse(_ai_sdk_sse(frames, ai_sdk.UiMessageParts()))
        for name, value in ai_sdk.HEADERS.items():
            response[name] = value
        return response
