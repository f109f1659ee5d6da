"""What a turn tells its transport: stream events and the typed error of refused input.

Every event is a small frozen dataclass whose ``to_dict()`` is the JSON payload, so Server-Sent
Events and websocket frames carry identical data (SSE: ``event: <type>`` + ``data: <json>``;
websocket: the JSON itself, which holds ``"type"``). A stream is ``start``, ``sources`` (when
retrieval ran, before the first ``delta``), ``tool_call`` and ``tool_result`` for each call of
each tool round, any number of ``delta``, then exactly one of ``done`` or ``error``.

===========  ===============================================================================
type         payload (besides ``"type"``)
===========  ===============================================================================
start        ``conversation_id``, ``chain``, ``trace_id``, ``version``
sources      ``sources``: ``[{"document_id", "title", "source", "score", "snippet", "retrieval"}]``
tool_call_   a piece of a tool call's arguments as the model streams them (tool loops only):
delta        ``id``, ``name``, ``arguments_delta`` (the next JSON text; ``""`` when the call is
             first named); before that call's ``tool_call``
tool_call    ``id``, ``name``, ``arguments`` (the JSON text the model sent)
tool_result  ``id``, ``name``, ``ok``, ``error`` (text the model got instead, or ``None``),
             ``duration_ms``
guard        a guard check flagged (or failed on) a text of the turn: ``rail`` (``input``,
             ``documents``, ``tool_arguments``, ``tool_results``, ``output``), ``check`` (its
             name), ``action`` (``block``, ``redact``, ``drop``, ``reask``, ``hold``, ``log``),
             ``failed`` (the check errored or timed out and acted as it fails); as the
             verdict is made, before what it changed reaches the stream
reasoning    ``text`` (a non-empty piece of the model's reasoning, apart from the answer: not in
             ``content``, not stored in memory)
delta        ``text`` (a non-empty piece of the answer)
budget_      a budget that counts this turn is past its soft limit (or a ``warn`` budget past
warning      its limit): ``budget``, ``spent`` (spent + reserved, a decimal string), ``limit``,
             ``currency``, ``percent``, ``reset_at`` (ISO time, ``None`` for a total),
             ``over_limit``; after ``start``, or when a later model round crosses it
approval_    ``approvals``: the tool calls that wait for a decision (``approval_id``, ``tool``,
required     ``arguments``, ``allowed_decisions``, ``reason``, ``expires_at``), after the
             deltas of a reply that paused (finish reason ``APPROVAL_REQUIRED``), before
             ``done``
done         ``reason`` (``"complete"`` | ``"cancelled"``), ``conversation_id`` (``None`` when
             the turn started a conversation and stored nothing: it was removed),
             ``message_id`` (the stored reply's id, or ``None``), ``stored`` (whether the
             turn's messages were stored: not for a guard's refusal or an empty partial
             reply), ``content`` (the whole answer; on cancel, what was streamed), ``usage``
             (``prompt_tokens``, ``completion_tokens``, ``total_tokens``; or ``None``),
             ``metadata`` (response metadata, JSON-compatible), ``finish_reason``,
             ``finish_category`` (``stop``, ``length``, ``tool_calls``, ``content_filter``,
             ``guardrail``, ``approval_required``, ``cancelled``, ``error``; or ``None``),
             ``trace_id``, ``version``, ``sources``, ``tools`` (the tool calls that ran:
             ``id``, ``name``, ``arguments``, ``ok``, ``error``, ``duration_ms``), ``timings``
             (``latency_ms``, ``time_to_first_token_ms``), ``pending_approvals`` (as in
             ``approval_required``; ``[]``), ``cost`` (``input``, ``output``, ``total`` as
             decimal strings — ``None`` when a price is unknown —, ``currency``,
             ``price_source``), ``budget_warnings`` (as in ``budget_warning``; ``[]``),
             ``guard`` (the turn's guard verdicts: ``rail``, ``check``, ``action``,
             ``detail``, ``failed``, ``ms``; ``[]``), ``experiment`` (``{"id", "arm"}``, only
             when an experiment chose the version): the :class:`TurnOutcome`
error        ``code``, ``message``, ``provider_status`` (the model provider's HTTP status or
             ``None``), ``retry_after`` (seconds, for ``rate_limited``, ``throttled`` and
             ``budget_exceeded``), ``reset_at`` (only for ``budget_exceeded``: the ISO time the
             used-up budget resets), ``errors`` (field →
             messages, for refused input), ``conversation_id`` (``None`` for refused input,
             and when the failed turn started a conversation and stored nothing), ``trace_id``
===========  ===============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from advisors_app.core.exceptions import (
    AuthenticationError,
    BadRequestError,
    BudgetExceededError,
    ContextOverflowError,
    GuardBlockedError,
    MalformedResponseError,
    OutputValidationError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitedError,
)
from advisors_app.exceptions import Refusal, TurnError
from advisors_app.security.redaction import redact, redact_data
from advisors_app.turn.outcome import TurnOutcome

__all__ = [
    "ApprovalRequiredEvent",
    "BudgetWarningEvent",
    "DeltaEvent",
    "DoneEvent",
    "ErrorEvent",
    "GuardEvent",
    "ReasoningEvent",
    "SourcesEvent",
    "StartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEvent",
    "ToolResultEvent",
    "TurnError",
    "TurnEvent",
    "budget_exceeded",
    "error_event",
    "server_shutdown_event",
]


@dataclass(frozen=True, slots=True)
class StartEvent:
    """The turn is validated and its conversation resolved; the chain starts now."""

    conversation_id: str
    chain: str
    trace_id: str
    #: The number of the chain version that runs (``None``: the draft).
    version: int | None = None
    type: str = field(default="start", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "conversation_id": self.conversation_id,
            "chain": self.chain,
            "trace_id": self.trace_id,
            "version": self.version,
        }


@dataclass(frozen=True, slots=True)
class DeltaEvent:
    """A piece of the answer's text, in order."""

    text: str
    type: str = field(default="delta", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True, slots=True)
class ReasoningEvent:
    """A piece of the model's reasoning (OpenAI-compatible ``reasoning_content``), in order;
    apart from the answer's text."""

    text: str
    type: str = field(default="reasoning", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "text": self.text}


@dataclass(frozen=True, slots=True)
class SourcesEvent:
    """The documents retrieval found for this turn, before the first ``delta``."""

    sources: list[dict[str, Any]]
    type: str = field(default="sources", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "sources": self.sources}


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """A tool call of the model starts to run (``arguments``: the JSON text the model sent)."""

    id: str
    name: str
    arguments: str
    type: str = field(default="tool_call", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class ToolCallDeltaEvent:
    """A piece of a tool call's arguments as the model streams them, before its ``tool_call``
    (``arguments_delta``: the next JSON text; ``""`` when the call is first named)."""

    id: str
    name: str
    arguments_delta: str
    type: str = field(default="tool_call_delta", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "id": self.id,
            "name": self.name,
            "arguments_delta": self.arguments_delta,
        }


@dataclass(frozen=True, slots=True)
class ToolResultEvent:
    """A tool call ended: ``ok``, or ``error`` (the text the model receives instead)."""

    id: str
    name: str
    ok: bool
    error: str | None
    duration_ms: float
    type: str = field(default="tool_result", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "id": self.id,
            "name": self.name,
            "ok": self.ok,
            "error": self.error,
            "duration_ms": self.duration_ms,
        }


@dataclass(frozen=True, slots=True)
class GuardEvent:
    """A guard check flagged a text of the turn (or failed): on ``rail``, ``check`` took
    ``action`` (the verdict's ``detail`` stays in the ``done`` event's ``guard``)."""

    rail: str
    check: str
    action: str
    failed: bool = False
    type: str = field(default="guard", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "rail": self.rail,
            "check": self.check,
            "action": self.action,
            "failed": self.failed,
        }


@dataclass(frozen=True, slots=True)
class ApprovalRequiredEvent:
    """The reply asked for tool calls that wait for a person's decision; the turn ends
    paused. Resume with ``decisions`` (see ``advisors_app.turn.input``)."""

    approvals: list[dict[str, Any]]
    type: str = field(default="approval_required", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "approvals": self.approvals}


@dataclass(frozen=True, slots=True)
class BudgetWarningEvent:
    """A budget counting this turn is past its soft limit (see ``advisors_app.costs.budgets``)."""

    warning: dict[str, Any]
    type: str = field(default="budget_warning", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **self.warning}


@dataclass(frozen=True, slots=True)
class DoneEvent:
    """The turn ended: ``reason`` is ``"complete"`` or ``"cancelled"`` (the consumer stopped);
    the payload is the turn's :class:`TurnOutcome`."""

    reason: str
    outcome: TurnOutcome
    type: str = field(default="done", init=False)

    @property
    def conversation_id(self) -> str | None:
        return self.outcome.conversation_id

    @property
    def content(self) -> str:
        return self.outcome.content

    @property
    def usage(self) -> dict[str, Any] | None:
        return self.outcome.usage

    @property
    def finish_reason(self) -> str | None:
        return self.outcome.finish_reason

    @property
    def finish_category(self) -> str | None:
        return self.outcome.finish_category

    @property
    def trace_id(self) -> str:
        return self.outcome.trace_id

    @property
    def message_id(self) -> int | None:
        return self.outcome.message_id

    @property
    def stored(self) -> bool:
        return self.outcome.stored

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "reason": self.reason, **self.outcome.to_dict()}


@dataclass(frozen=True, slots=True)
class ErrorEvent:
    """The turn failed (or was refused): a stable ``code`` and a message fit for the user."""

    code: str
    message: str
    provider_status: int | None = None
    retry_after: float | None = None
    errors: dict[str, list[str]] = field(default_factory=dict)
    conversation_id: str | None = None
    trace_id: str | None = None
    reset_at: str | None = None
    type: str = field(default="error", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "code": self.code,
            "message": self.message,
            "provider_status": self.provider_status,
            "retry_after": self.retry_after,
            "errors": self.errors,
            "conversation_id": self.conversation_id,
            "trace_id": self.trace_id,
            # Only for ``budget_exceeded``: the other codes' payloads keep their shape.
            **({"reset_at": self.reset_at} if self.reset_at is not None else {}),
        }


TurnEvent = (
    StartEvent
    | SourcesEvent
    | ToolCallDeltaEvent
    | ToolCallEvent
    | ToolResultEvent
    | GuardEvent
    | ReasoningEvent
    | DeltaEvent
    | ApprovalRequiredEvent
    | BudgetWarningEvent
    | DoneEvent
    | ErrorEvent
)


def budget_exceeded(
    exc: BudgetExceededError,
    *,
    conversation_id: str | None = None,
    trace_id: str | None = None,
) -> TurnError:
    """The ``budget_exceeded`` refusal (HTTP 429) for ``exc``: when its budget resets, as
    ``retry_after`` seconds and ``reset_at``."""
    reset = exc.reset_at
    wait = max((reset - datetime.now(reset.tzinfo)).total_seconds(), 1.0) if reset else None
    return TurnError(
        "budget_exceeded",
        str(exc),
        http_status=429,
        retry_after=round(wait) if wait is not None else None,
        reset_at=reset.isoformat() if reset else None,
        trace_id=trace_id,
        conversation_id=conversation_id,
    )


# Most specific first: the first matching class decides the code.
_PROVIDER_CODES: tuple[tuple[type[ProviderError], str], ...] = (
    (RateLimitedError, "rate_limited"),
    (ProviderTimeoutError, "provider_timeout"),
    (ProviderConnectionError, "provider_unreachable"),
    (ProviderUnavailableError, "provider_unavailable"),
    (MalformedResponseError, "provider_malformed_response"),
    (AuthenticationError, "provider_authentication"),
    (BadRequestError, "provider_bad_request"),
    (ProviderError, "provider_error"),
)


def error_event(
    exc: BaseException, *, conversation_id: str | None = None, trace_id: str | None = None
) -> ErrorEvent:
    """The ``error`` event for an exception a turn raised (the same for calls and streams).

    Provider errors keep their message and HTTP status (bug case B32), with every secret
    value and credential-shaped token replaced (:func:`advisors_app.security.redaction.redact`: a
    provider that answers ``401 Incorrect API key provided: <key>`` must not hand the key to
    the user); a prompt over the model's context window is ``context_overflow`` with the sizes
    (HTTP 400 in REST: the request, not the provider, is at fault); a failed output
    validation says so; anything else is ``internal_error`` with a
    message that reveals nothing but the trace id (the call log holds the details).

    Any :class:`~advisors_app.exceptions.Refusal` is its own ``code``, ``message``, ``fields``
    (as ``errors``), ``retry_after``, ``conversation_id``, ``trace_id`` and ``reset_at``, its
    message and fields redacted too: the one mapping of a refusal to an ``error`` frame (SSE,
    websocket, and the MCP server's tool errors); REST bodies are built from it.
    """
    outcome = getattr(exc, "turn_outcome", None)  # set by call_turn on a failed turn
    if isinstance(outcome, TurnOutcome):
        conversation_id = conversation_id or outcome.conversation_id
        trace_id = trace_id or outcome.trace_id
    if isinstance(exc, Refusal):
        return ErrorEvent(
            exc.code,
            redact(exc.message),
            retry_after=exc.retry_after,
            errors=redact_data(exc.fields),
            conversation_id=exc.conversation_id,
            trace_id=exc.trace_id,
            reset_at=exc.reset_at,
        )
    if isinstance(exc, ProviderError):
        code = next(c for cls, c in _PROVIDER_CODES if isinstance(exc, cls))
        return ErrorEvent(
            code,
            redact(exc.message),
            provider_status=exc.status,
            retry_after=getattr(exc, "retry_after", None),
            conversation_id=conversation_id,
            trace_id=trace_id,
        )
    if isinstance(exc, BudgetExceededError):
        return error_event(budget_exceeded(exc, conversation_id=conversation_id, trace_id=trace_id))
    if isinstance(exc, ContextOverflowError):
        return ErrorEvent(
            "context_overflow", str(exc), conversation_id=conversation_id, trace_id=trace_id
        )
    if isinstance(exc, GuardBlockedError):
        # A rail whose guard sits inside the advisor that screened: no refusal answer was
        # made, so the block surfaces as this error.
        return ErrorEvent(
            exc.code,
            f"A safety check ({exc.check}) stopped this turn on the {exc.rail} rail.",
            conversation_id=conversation_id,
            trace_id=trace_id,
        )
    if isinstance(exc, OutputValidationError):
        return ErrorEvent(
            "output_invalid",
            "The model's answer did not match the expected format.",
            conversation_id=conversation_id,
            trace_id=trace_id,
        )
    return ErrorEvent(
        "internal_error",
        f"The chain failed (trace {trace_id}).",
        conversation_id=conversation_id,
        trace_id=trace_id,
    )


def server_shutdown_event(conversation_id: str | None, trace_id: str | None) -> ErrorEvent:
    """The ``error`` event (code ``server_shutdown``) that ends a stream the server stopped as
    it shut down: what the turn had was stored, its reply flagged interrupted (``conversation_id``
    ``None``: a first turn that stored nothing); the client may send the message again."""
    return ErrorEvent(
        "server_shutdown",
        "The server is shutting down and stopped this turn; what it had is saved. "
        "Send the message again in a moment.",
        conversation_id=conversation_id,
        trace_id=trace_id,
    )
