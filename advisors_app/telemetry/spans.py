"""A finished turn as OpenTelemetry spans, built after the fact from what the turn recorded.

One source: the turn's :class:`~advisors_app.core.tracing.CallTrace` (the advisor
invocations), its meter's rounds (every model call, with usage and cost) and its tool calls,
all timed with ``time.perf_counter()`` — mapped to wall-clock nanoseconds once, here. The spans
get explicit start and end times, so nothing runs on the turn's hot path.

* the turn: ``invoke_agent <chain>`` (``gen_ai.operation.name=invoke_agent``,
  ``gen_ai.agent.name``), with the chain version, the call log's trace id, the status and the
  turn's cost;
* each advisor invocation under its enclosing one (``advisors_app.advisor.name``, ``.order``);
* each model call, ``chat <model>``, under the advisor running when it went out:
  ``gen_ai.operation.name=chat``, ``gen_ai.provider.name`` (and the older ``gen_ai.system``),
  ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens``,
  ``.output_tokens``, ``gen_ai.response.finish_reasons`` (the last call), and its cost;
* each tool call, ``execute_tool <tool>``: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``error.type`` when it failed.

No content: no message, prompt, tool argument or result, nor any header goes into an attribute
(the conventions' content capture is off and cannot be turned on).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

__all__ = ["PROVIDER_NAME", "record_turn"]

#: ``gen_ai.system`` of the turn and advisor spans: the framework, as the core's live observer.
PROVIDER_NAME = "advisors_app"


@dataclass(frozen=True, slots=True)
class _Clock:
    """``time.perf_counter()`` values → epoch nanoseconds, from one reading of both clocks."""

    epoch_ns: int
    perf: float

    @classmethod
    def now(cls) -> _Clock:
        return cls(time.time_ns(), time.perf_counter())

    def ns(self, perf: float) -> int:
        return self.epoch_ns - round((self.perf - perf) * 1e9)


@dataclass(frozen=True, slots=True)
class _Interval:
    start: float
    end: float
    span: Any


def _attributes(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` without ``None`` and empty strings (OpenTelemetry drops ``None`` with a
    warning)."""
    return {k: v for k, v in values.items() if v is not None and v != ""}


def _parent(intervals: list[_Interval], at: float, default: Any) -> Any:
    """The innermost advisor span running at ``at`` (the latest started), else ``default``."""
    found = default
    for interval in intervals:
        if interval.start <= at <= interval.end:
            found = interval.span
    return found


def record_turn(tracer: Tracer, finished: Any) -> None:
    """The spans of ``finished`` (a :class:`~advisors_app.turn.state.Finished`), ended."""
    turn, outcome, log = finished.turn, finished.outcome, finished.call_log
    clock = _Clock.now()
    latency = (outcome.timings.get("latency_ms") or 0.0) / 1000
    turn_end = turn.started + latency
    cost = outcome.cost or {}
    root = tracer.start_span(
        f"invoke_agent {outcome.chain}",
        kind=SpanKind.INTERNAL,
        start_time=clock.ns(turn.started),
        attributes=_attributes(
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.system": PROVIDER_NAME,
                "gen_ai.provider.name": PROVIDER_NAME,
                "gen_ai.agent.name": outcome.chain,
                "gen_ai.conversation.id": outcome.conversation_id,
                "advisors_app.chain": outcome.chain,
                "advisors_app.chain.version": outcome.version,
                "advisors_app.chain.label": turn.target.label,
                "advisors_app.trace_id": outcome.trace_id,
                "advisors_app.call_log.id": log.pk,
                "advisors_app.mode": turn.mode,
                "advisors_app.status": outcome.status,
                "advisors_app.cost.total": cost.get("total"),
                "advisors_app.cost.currency": cost.get("currency"),
                "gen_ai.response.finish_reasons": (
                    [outcome.finish_reason] if outcome.finish_reason else None
                ),
            }
        ),
    )
    if outcome.status == "error":
        root.set_status(Status(StatusCode.ERROR))
        root.set_attribute("error.type", log.error_type or "error")
    elif outcome.status == "cancelled":
        root.set_attribute("error.type", "cancelled")
    advisors = _advisor_spans(tracer, turn.trace, root, clock, turn_end)
    _model_spans(tracer, turn.meter.rounds, advisors, root, clock, outcome)
    _tool_spans(tracer, turn.tools, turn.tool_started, advisors, root, clock)
    for interval in reversed(advisors):
        interval.span.end(end_time=clock.ns(interval.end))
    root.end(end_time=clock.ns(turn_end))


def _advisor_spans(
    tracer: Tracer, call_trace: Any, root: Any, clock: _Clock, turn_end: float
) -> list[_Interval]:
    """One span per advisor invocation, under its enclosing one; not ended yet (the model
    and tool spans find their parent among them first)."""
    origin = call_trace.origin
    intervals: list[_Interval] = []
    for entry in call_trace.entries:
        start = origin + entry.started
        end = start + entry.duration if entry.duration is not None else turn_end
        parent = intervals[entry.parent].span if entry.parent is not None else root
        span = tracer.start_span(
            f"advisor {entry.name}",
            context=trace.set_span_in_context(parent),
            start_time=clock.ns(start),
            attributes=_attributes(
                {
                    "gen_ai.operation.name": "framework",
                    "gen_ai.system": PROVIDER_NAME,
                    "advisors_app.kind": "advisor",
                    "advisors_app.advisor.name": entry.name,
                    "advisors_app.advisor.order": entry.order,
                    "advisors_app.mode": entry.mode,
                    "advisors_app.status": entry.status,
                    "advisors_app.stream.chunks": entry.chunks if entry.mode == "stream" else None,
                }
            ),
        )
        if entry.status == "error":
            # The type only: an error's text may quote what the user wrote.
            span.set_status(Status(StatusCode.ERROR))
            span.set_attribute("error.type", (entry.error or "error").split(":", 1)[0])
        intervals.append(_Interval(start, end, span))
    return intervals


def _model_spans(
    tracer: Tracer,
    rounds: list[Any],
    advisors: list[_Interval],
    root: Any,
    clock: _Clock,
    outcome: Any,
) -> None:
    timed = [r for r in rounds if r.started is not None]
    response_model = (outcome.metadata or {}).get("model")
    for number, round_ in enumerate(timed):
        last = number == len(timed) - 1
        # A configuration without a model name (a scripted one) is named by its slug.
        model = round_.ref.model or round_.ref.config
        end = round_.ended if round_.ended is not None else round_.started
        usage = round_.usage
        cost = round_.cost
        span = tracer.start_span(
            f"chat {model}",
            kind=SpanKind.CLIENT,
            context=trace.set_span_in_context(_parent(advisors, round_.started, root)),
            start_time=clock.ns(round_.started),
            attributes=_attributes(
                {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.system": round_.ref.provider,
                    "gen_ai.provider.name": round_.ref.provider,
                    "gen_ai.request.model": model,
                    "gen_ai.response.model": (
                        response_model
                        if last and isinstance(response_model, str) and response_model
                        else model
                    ),
                    "gen_ai.usage.input_tokens": usage.prompt_tokens if usage else None,
                    "gen_ai.usage.output_tokens": usage.completion_tokens if usage else None,
                    "gen_ai.response.finish_reasons": (
                        [outcome.finish_reason] if last and outcome.finish_reason else None
                    ),
                    "advisors_app.model_config": round_.ref.config,
                    "advisors_app.usage.estimated": round_.estimated,
                    "advisors_app.cost.input": _decimal(cost.input if cost else None),
                    "advisors_app.cost.output": _decimal(cost.output if cost else None),
                    "advisors_app.cost.currency": cost.currency if cost else None,
                }
            ),
        )
        span.end(end_time=clock.ns(max(end, round_.started)))


def _decimal(value: Any) -> str | None:
    return None if value is None else str(value)


def _tool_spans(
    tracer: Tracer,
    tools: list[dict[str, Any]],
    started: list[float],
    advisors: list[_Interval],
    root: Any,
    clock: _Clock,
) -> None:
    for entry, start in zip(tools, started, strict=False):
        duration = (entry.get("duration_ms") or 0.0) / 1000
        span = tracer.start_span(
            f"execute_tool {entry['name']}",
            context=trace.set_span_in_context(_parent(advisors, start, root)),
            start_time=clock.ns(start),
            attributes=_attributes(
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": entry["name"],
                    "gen_ai.tool.call.id": entry.get("id"),
                    "gen_ai.tool.type": "function",
                }
            ),
        )
        if entry.get("ok") is False:
            span.set_status(Status(StatusCode.ERROR))
            span.set_attribute("error.type", "tool_error")
        span.end(end_time=clock.ns(start + duration))
