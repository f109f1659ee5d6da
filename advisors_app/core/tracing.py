"""Observers of the advisor chain: OpenTelemetry spans and a per-call trace (Spring AI).

Pass one to ``ChatClient(..., observer=...)`` or ``spec.observer(...)``; the chain hands every
advisor invocation to it (:class:`~advisors_app.core.observation.AdvisorObserver`).

* :class:`OpenTelemetryObserver` opens one span per advisor through ``opentelemetry-api`` (a
  no-op until an SDK is configured). Spring AI's ``spring.ai.advisor`` observation translated:
  the span is named after the advisor the way Spring's contextual name is built
  (``SafeGuardAdvisor`` → ``safe_guard``), with ``gen_ai.operation.name=framework``,
  ``gen_ai.system=advisors_app``, ``advisors_app.kind=advisor``,
  ``advisors_app.advisor.name`` and ``advisors_app.advisor.order`` (Spring's
  ``spring.ai.kind``, ``spring.ai.advisor.name``, ``spring.ai.advisor.order``). The model
  advisors' span follows the GenAI conventions instead: ``chat <model>``,
  ``gen_ai.operation.name=chat`` and the token usage. Inner spans nest under outer ones, in
  streams too: a stream's span is current while its downstream is being pulled and ends when
  the stream ends, fails or is closed.
* :class:`CallTrace` records, per advisor invocation, the request as it entered, the response
  as it left (aggregated for streams), times and usage, as JSON-compatible data for the admin
  and the chat page. Create one per call: it holds that call's entries.
* :class:`CompositeObserver` combines observers (the first is outermost).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace

from .advisor import Advisor
from .aggregation import ChatClientResponseAccumulator
from .requests import ChatClientRequest, ChatClientResponse
from .serialization import request_to_dict, response_to_dict
from .streams import closing_stream

__all__ = [
    "AdvisorTraceEntry",
    "CallTrace",
    "CompositeObserver",
    "OpenTelemetryObserver",
    "contextual_name",
]

CallProceed = Callable[[ChatClientRequest], Awaitable[ChatClientResponse]]
StreamProceed = Callable[[ChatClientRequest], AsyncIterator[ChatClientResponse]]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[\s_\-.]+")


def contextual_name(advisor_name: str) -> str:
    """Spring AI's contextual name: camel case split, lower-cased, ``_advisor`` suffix removed.

    ``"MyName"`` → ``"my_name"``, ``"SafeGuardAdvisor"`` → ``"safe_guard"``,
    ``"Structured Output Validation Advisor"`` → ``"structured_output_validation"``.
    """
    name = "_".join(p for p in _CAMEL.split(advisor_name) if p).lower()
    return name.replace("_around_advisor", "").replace("_advisor", "") or name


def _usage_of(response: ChatClientResponse | None) -> Any:
    chat_response = response.chat_response if response is not None else None
    return chat_response.metadata.usage if chat_response is not None else None


class OpenTelemetryObserver:
    """One OpenTelemetry span per advisor invocation (see the module docstring).

    ``tracer_provider`` defaults to the global one, so configuring the SDK later still works.
    Errors are recorded on the span (exception event, status ERROR) and re-raised unchanged.
    A span that does not record (no SDK configured, or sampled out) costs one span start: the
    call or stream then runs unwrapped, with no per-chunk work.
    """

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer("advisors_app", tracer_provider=tracer_provider)

    def _start(self, advisor: Advisor, request: ChatClientRequest, mode: str) -> trace.Span:
        if getattr(advisor, "is_model_advisor", False):
            options = request.prompt.options
            model = getattr(options, "model", None)
            attributes: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.system": "advisors_app",
                "advisors_app.advisor.name": advisor.name,
            }
            if model:
                attributes["gen_ai.request.model"] = model
            name = f"chat {model}" if model else "chat"
        else:
            attributes = {
                "gen_ai.operation.name": "framework",
                "gen_ai.system": "advisors_app",
                "advisors_app.kind": "advisor",
                "advisors_app.advisor.name": advisor.name,
                "advisors_app.advisor.order": advisor.order,
            }
            name = contextual_name(advisor.name)
        attributes["advisors_app.advisor.mode"] = mode
        return self._tracer.start_span(name, attributes=attributes)

    @staticmethod
    def _finish(span: trace.Span, response: ChatClientResponse | None) -> None:
        usage = _usage_of(response)
        if usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
        chat_response = response.chat_response if response is not None else None
        if chat_response is not None and chat_response.metadata.model:
            span.set_attribute("gen_ai.response.model", chat_response.metadata.model)

    @staticmethod
    def _fail(span: trace.Span, exc: BaseException) -> None:
        span.record_exception(exc)
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))

    def observe_call(
        self, advisor: Advisor, request: ChatClientRequest, proceed: CallProceed
    ) -> Awaitable[ChatClientResponse]:
        span = self._start(advisor, request, "call")
        if not span.is_recording():  # no SDK configured: nothing to record, nothing to wrap
            return proceed(request)
        return self._traced_call(span, request, proceed)

    async def _traced_call(
        self, span: trace.Span, request: ChatClientRequest, proceed: CallProceed
    ) -> ChatClientResponse:
        token = otel_context.attach(trace.set_span_in_context(span))
        try:
            response = await proceed(request)
            self._finish(span, response)
            return response
        except BaseException as exc:
            self._fail(span, exc)
            raise
        finally:
            otel_context.detach(token)
            span.end()

    def observe_stream(
        self, advisor: Advisor, request: ChatClientRequest, proceed: StreamProceed
    ) -> AsyncIterator[ChatClientResponse]:
        span = self._start(advisor, request, "stream")
        if not span.is_recording():  # no SDK configured: the chunks pass untouched
            return proceed(request)
        return self._traced_stream(span, request, proceed)

    async def _traced_stream(
        self, span: trace.Span, request: ChatClientRequest, proceed: StreamProceed
    ) -> AsyncIterator[ChatClientResponse]:
        span_context = trace.set_span_in_context(span)
        accumulator = ChatClientResponseAccumulator()
        try:
            async with closing_stream(proceed(request)) as chunks:
                while True:
                    # The span is current only while the downstream runs, never across a yield
                    # (the consumer's code must not appear inside it).
                    token = otel_context.attach(span_context)
                    try:
                        chunk = await anext(chunks)
                    except StopAsyncIteration:
                        break
                    finally:
                        otel_context.detach(token)
                    accumulator.add(chunk)
                    yield chunk
            self._finish(span, accumulator.result())
        except (GeneratorExit, asyncio.CancelledError):
            span.set_attribute("advisors_app.stream.cancelled", True)
            raise
        except BaseException as exc:
            self._fail(span, exc)
            raise
        finally:
            span.end()


@dataclass(slots=True)
class AdvisorTraceEntry:
    """One advisor invocation in a :class:`CallTrace`; times in seconds.

    ``started`` counts from the trace's creation; ``parent`` is the index of the enclosing
    invocation (``None`` for the outermost); ``first_chunk`` (streams) counts from ``started``;
    ``status`` is ``"running"``, ``"ok"``, ``"error"`` or ``"cancelled"``.
    """

    index: int
    parent: int | None
    name: str
    order: int
    mode: str
    started: float
    request: dict[str, Any] | None
    response: dict[str, Any] | None = None
    duration: float | None = None
    first_chunk: float | None = None
    chunks: int = 0
    usage: dict[str, Any] | None = None
    status: str = "running"
    error: str | None = None


class CallTrace:
    """A per-call record of every advisor invocation (an ``AdvisorObserver``).

    ``max_text`` cuts each string in the recorded requests/responses to that many characters
    (``None``: no limit); ``capture_payloads=False`` records times, status and chunk counts
    only (usage too for calls; streams are not aggregated then).
    ``to_dict()`` is JSON-serialisable: ``{"duration": s, "entries": [...]}`` where each entry
    is an :class:`AdvisorTraceEntry` plus ``self_duration`` (its duration minus its children's).
    """

    def __init__(self, *, max_text: int | None = 2000, capture_payloads: bool = True) -> None:
        self.entries: list[AdvisorTraceEntry] = []
        #: The entry whose downstream is running now: the parent of an entry opened meanwhile.
        #: A turn's advisors run one at a time, so an attribute (no context variable, which
        #: would cost more per streamed chunk) is enough.
        self._current: int | None = None
        self._max_text = max_text
        self._capture = capture_payloads
        self._origin = time.perf_counter()

    def _open(self, advisor: Advisor, request: ChatClientRequest, mode: str) -> AdvisorTraceEntry:
        entry = AdvisorTraceEntry(
            index=len(self.entries),
            parent=self._current,
            name=advisor.name,
            order=advisor.order,
            mode=mode,
            started=time.perf_counter() - self._origin,
            request=request_to_dict(request, self._max_text) if self._capture else None,
        )
        self.entries.append(entry)
        return entry

    def _close(
        self, entry: AdvisorTraceEntry, response: ChatClientResponse | None, status: str
    ) -> None:
        entry.duration = time.perf_counter() - self._origin - entry.started
        entry.status = status
        if response is not None:
            usage = _usage_of(response)
            entry.usage = usage.to_dict() if usage is not None else None
            if self._capture:
                entry.response = response_to_dict(response, self._max_text)

    @staticmethod
    def _failed(entry: AdvisorTraceEntry, exc: BaseException) -> str:
        entry.error = f"{type(exc).__name__}: {exc}"
        return "error"

    async def observe_call(
        self, advisor: Advisor, request: ChatClientRequest, proceed: CallProceed
    ) -> ChatClientResponse:
        entry = self._open(advisor, request, "call")
        outer, self._current = self._current, entry.index
        try:
            response = await proceed(request)
        except asyncio.CancelledError:
            self._close(entry, None, "cancelled")
            raise
        except BaseException as exc:
            self._close(entry, None, self._failed(entry, exc))
            raise
        finally:
            self._current = outer
        self._close(entry, response, "ok")
        return response

    async def observe_stream(
        self, advisor: Advisor, request: ChatClientRequest, proceed: StreamProceed
    ) -> AsyncIterator[ChatClientResponse]:
        entry = self._open(advisor, request, "stream")
        # Without payloads only times and counts are kept: no per-chunk aggregation, which
        # would cost more per chunk than the advisor itself.
        accumulator = ChatClientResponseAccumulator() if self._capture else None
        outer, index = self._current, entry.index
        try:
            async with closing_stream(proceed(request)) as chunks:
                # The entry is the current one while the downstream runs (each step of the
                # ``async for``), never while the chunk is with the consumer.
                self._current = index
                try:
                    async for chunk in chunks:
                        self._current = outer
                        if entry.first_chunk is None:
                            entry.first_chunk = time.perf_counter() - self._origin - entry.started
                        entry.chunks += 1
                        if accumulator is not None:
                            accumulator.add(chunk)
                        yield chunk
                        self._current = index
                finally:
                    self._current = outer
        except (GeneratorExit, asyncio.CancelledError):
            self._close(entry, self._aggregate(entry, accumulator), "cancelled")
            raise
        except BaseException as exc:
            partial = self._aggregate(entry, accumulator)
            self._close(entry, partial, self._failed(entry, exc))
            raise
        self._close(entry, self._aggregate(entry, accumulator), "ok")

    @staticmethod
    def _aggregate(
        entry: AdvisorTraceEntry, accumulator: ChatClientResponseAccumulator | None
    ) -> ChatClientResponse | None:
        return accumulator.result() if accumulator is not None and entry.chunks else None

    @property
    def origin(self) -> float:
        """The ``time.perf_counter()`` the entries' ``started`` count from."""
        return self._origin

    @property
    def duration(self) -> float | None:
        """Seconds the outermost invocations took (``None`` while one is still running)."""
        roots = [e for e in self.entries if e.parent is None]
        if not roots or any(e.duration is None for e in roots):
            return None
        return max(e.started + (e.duration or 0.0) for e in roots) - min(e.started for e in roots)

    def to_dict(self) -> dict[str, Any]:
        children: dict[int, float] = {}
        for entry in self.entries:
            if entry.parent is not None and entry.duration is not None:
                children[entry.parent] = children.get(entry.parent, 0.0) + entry.duration
        entries = []
        for entry in self.entries:
            data = {slot: getattr(entry, slot) for slot in AdvisorTraceEntry.__slots__}
            data["self_duration"] = (
                None if entry.duration is None else entry.duration - children.get(entry.index, 0.0)
            )
            entries.append(data)
        return {"duration": self.duration, "entries": entries}


class CompositeObserver:
    """Runs several observers around each invocation; the first given is the outermost."""

    def __init__(self, *observers: Any) -> None:
        self._observers = tuple(o for o in observers if o is not None)

    @property
    def observers(self) -> tuple[Any, ...]:
        return self._observers

    def observe_call(
        self, advisor: Advisor, request: ChatClientRequest, proceed: CallProceed
    ) -> Awaitable[ChatClientResponse]:
        for observer in reversed(self._observers):
            proceed = _bind_call(observer, advisor, proceed)
        return proceed(request)

    def observe_stream(
        self, advisor: Advisor, request: ChatClientRequest, proceed: StreamProceed
    ) -> AsyncIterator[ChatClientResponse]:
        for observer in reversed(self._observers):
            proceed = _bind_stream(observer, advisor, proceed)
        return proceed(request)


def _bind_call(observer: Any, advisor: Advisor, proceed: CallProceed) -> CallProceed:
    return lambda request: observer.observe_call(advisor, request, proceed)


def _bind_stream(observer: Any, advisor: Advisor, proceed: StreamProceed) -> StreamProceed:
    return lambda request: observer.observe_stream(advisor, request, proceed)
