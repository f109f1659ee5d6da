"""What a turn tells its transport: stream events and the typed error of refused input.

Every event is a small frozen dataclass whose ``to_dict()`` is the JSON payload, so Server-Sent
Events and websocket frames carry identical data (SSE: ``event: <type>`` + ``data: <json>``;
websocket: the JSON itself, which holds ``"type"``). A stream is ``start``, any number of
``delta``, then exactly one of ``done`` or ``error``.

=========  ===============================================================================
type       payload (besides ``"type"``)
=========  ===============================================================================
start      ``conversation_id``, ``chain``, ``trace_id``
delta      ``text`` (a non-empty piece of the answer)
done       ``reason`` (``"complete"`` | ``"cancelled"``), ``conversation_id`` (``None`` when
           the turn started a conversation and stored nothing: it was removed),
           ``message_id`` (the stored reply's id, or ``None``), ``stored`` (whether the
           turn's messages were stored: not for a guard's refusal or an empty partial
           reply), ``content`` (the whole answer; on cancel, what was streamed), ``usage``
           (``prompt_tokens``, ``completion_tokens``, ``total_tokens``; or ``None``),
           ``metadata`` (response metadata, JSON-compatible), ``finish_reason``,
           ``trace_id``
error      ``code``, ``message``, ``provider_status`` (the model provider's HTTP status or
           ``None``), ``retry_after`` (seconds, for ``rate_limited``), ``errors`` (field →
           messages, for refused input), ``conversation_id`` (``None`` for refused input,
           and when the failed turn started a conversation and stored nothing), ``trace_id``
=========  ===============================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisors_app.core.exceptions import (
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    OutputValidationError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitedError,
)

__all__ = [
    "DeltaEvent",
    "DoneEvent",
    "ErrorEvent",
    "StartEvent",
    "TurnError",
    "TurnEvent",
    "error_event",
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
class DoneEvent:
    """The turn ended: ``reason`` is ``"complete"`` or ``"cancelled"`` (the consumer stopped).

    ``message_id`` is the stored reply's id and ``stored`` whether the turn stored anything;
    ``conversation_id`` is ``None`` when the turn started a conversation that, holding
    nothing, was removed again.
    """

    reason: str
    conversation_id: str | None
    content: str
    usage: dict[str, Any] | None
    metadata: dict[str, Any]
    finish_reason: str | None
    trace_id: str
    message_id: int | None = None
    stored: bool = False
    type: str = field(default="done", init=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "reason": self.reason,
            "conversation_id": self.conversation_id,
            "message_id": self.message_id,
            "stored": self.stored,
            "content": self.content,
            "usage": self.usage,
            "metadata": self.metadata,
            "finish_reason": self.finish_reason,
            "trace_id": self.trace_id,
        }


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
        }


TurnEvent = StartEvent | DeltaEvent | DoneEvent | ErrorEvent


class TurnError(Exception):
    """Raised when a turn is refused before it runs; nothing was stored.

    ``code``: ``"invalid"`` (400, see ``errors``), ``"not_authenticated"`` (401),
    ``"permission_denied"`` (403), ``"chain_not_found"``/``"version_not_found"`` (404),
    ``"throttled"`` (429, ``retry_after`` seconds) or ``"chain_misconfigured"`` (500: the
    stored chain cannot be built; the message says why). ``errors`` maps fields (``message``,
    ``conversation_id``, ``params.options.temperature``, ``chain``) to messages;
    ``http_status`` is what a REST view should answer with.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        errors: dict[str, list[str]] | None = None,
        http_status: int = 400,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.errors = errors or {}
        self.http_status = http_status
        self.retry_after = retry_after

    def to_event(self) -> ErrorEvent:
        """The ``error`` event a stream transport sends for this refusal."""
        return ErrorEvent(self.code, self.message, errors=self.errors, retry_after=self.retry_after)

    def to_dict(self) -> dict[str, Any]:
        return self.to_event().to_dict()


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

    Provider errors keep their message and HTTP status (bug case B32); a failed output
    validation says so; anything else is ``internal_error`` with a message that reveals
    nothing but the trace id (the call log holds the details).
    """
    if isinstance(exc, TurnError):
        return exc.to_event()
    if isinstance(exc, ProviderError):
        code = next(c for cls, c in _PROVIDER_CODES if isinstance(exc, cls))
        return ErrorEvent(
            code,
            exc.message,
            provider_status=exc.status,
            retry_after=getattr(exc, "retry_after", None),
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
