"""Exceptions raised by the advisor engine and its model providers.

The tree (Spring AI's IllegalArgumentException is Python's ``ValueError``)::

    Exception
    ├── AdvisorStateError (RuntimeError)   misuse: Spring's IllegalStateException
    ├── OutputValidationError (ValueError) structured output still invalid after every attempt
    ├── ContextOverflowError (ValueError)  the prompt does not fit the model's context window
    ├── BudgetExceededError (RuntimeError) a spending limit refuses the model call
    ├── ToolCallLimitExceededError (RuntimeError)  a turn made more tool calls than allowed
    ├── GuardBlockedError (RuntimeError)   a guard rail inside the chain blocked the turn
    └── ProviderError                      a model provider call failed (status/body kept)
        ├── BadRequestError                4xx other than 401/403/408/429: the request is wrong
        ├── AuthenticationError            401/403: the key is missing, wrong or not allowed
        ├── ModelFailure                   transient faults a fallback model may absorb
        │   ├── ProviderTimeoutError       no answer within the configured timeout
        │   ├── ProviderConnectionError    the server could not be reached
        │   ├── RateLimitedError           429, with ``retry_after`` seconds when sent
        │   ├── ProviderUnavailableError   5xx
        │   └── MalformedResponseError     a cut or unparseable (stream) response
        └── (provider-specific subclasses)

Streams raise the same types as calls, while iterating, never wrapped by advisors (fix for
Spring AI's ``IllegalStateException("Stream processing failed")`` wrapping, seed §6.16.2 #4).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .messages import Message
    from .response import Generation

__all__ = [
    "AdvisorStateError",
    "AuthenticationError",
    "BadRequestError",
    "BudgetExceededError",
    "ContextOverflowError",
    "GuardBlockedError",
    "MalformedResponseError",
    "ModelFailure",
    "OutputValidationError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitedError",
    "ToolCallLimitExceededError",
]


class AdvisorStateError(RuntimeError):
    """Raised when the engine is misused: an exhausted chain, two tool advisors, a missing model."""


class OutputValidationError(ValueError):
    """Raised when structured output is still invalid after every retry (when asked to raise)."""

    def __init__(self, message: str, *, output: str | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.output = output
        self.attempts = attempts


class ContextOverflowError(ValueError):
    """Raised before a model call whose prompt cannot fit the model's context window.

    ``prompt_tokens`` is the estimated size of the prompt (system, history, retrieved context,
    tool definitions, the new message); ``limit`` what the model accepts,
    ``context_window - max_tokens``; ``max_tokens`` the completion tokens reserved for the
    answer; ``model`` names the model when it has a name. All sizes in tokens. No Spring AI
    counterpart (issue 20): the provider's own 400 would come later and say less.
    """

    def __init__(
        self,
        prompt_tokens: int,
        limit: int,
        context_window: int,
        max_tokens: int,
        *,
        model: str | None = None,
    ) -> None:
        self.prompt_tokens = prompt_tokens
        self.limit = limit
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.model = model
        named = f"chat model {model}" if model else "the chat model"
        super().__init__(
            f"The prompt needs {prompt_tokens:,} tokens but {named} accepts {max(limit, 0):,} "
            f"(context window {context_window:,} minus {max_tokens:,} reserved for the "
            "answer): shorten the message, or start a new conversation."
        )


class BudgetExceededError(RuntimeError):
    """Raised before a model call that a spending limit refuses (see ``core.metering``).

    ``budget`` names the limit, ``limit`` / ``currency`` / ``period`` describe it, ``reset_at``
    is when its period ends (``None``: a total that never resets). No Spring AI counterpart.
    """

    def __init__(
        self,
        message: str,
        *,
        budget: str,
        limit: Any = None,
        currency: str = "",
        period: str = "",
        reset_at: datetime | None = None,
    ) -> None:
        super().__init__(message)
        self.budget = budget
        self.limit = limit
        self.currency = currency
        self.period = period
        self.reset_at = reset_at


class ToolCallLimitExceededError(RuntimeError):
    """Raised when a tool call breaks a per-tool, total or identical-call limit of the turn.

    Spring AI ``ToolCallLimitExceededException``. ``partial_history`` is the turn's history up
    to the breach: its last message is the round's ``ToolResponseMessage`` holding the responses
    of the calls that ran, then the breach text. ``kind`` is ``"tool"``, ``"total"`` or
    ``"identical"``; ``tool_name`` is ``None`` for the total limit. The ``ToolCallingAdvisor``
    turns it into a generation (:meth:`build_generation`) rather than letting it propagate.
    """

    FINISH_REASON = "toolCallLimitExceeded"
    METADATA_PARTIAL_TOOL_RESPONSES = "partialToolResponses"

    def __init__(
        self,
        message: str,
        *,
        limit: int,
        kind: str,
        tool_name: str | None = None,
        partial_history: Sequence[Message] = (),
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.kind = kind
        self.tool_name = tool_name
        self.partial_history = tuple(partial_history)

    def build_generation(self) -> Generation:
        """The breach as one generation with finish reason ``"toolCallLimitExceeded"``.

        Its text is the breach text (the last tool response of the partial history); the
        responses of the calls that did run are in the generation metadata under
        ``"partialToolResponses"`` (a tuple of ``ToolResponse``).
        """
        from .messages import AssistantMessage, ToolResponseMessage
        from .response import ChatGenerationMetadata, Generation

        last = self.partial_history[-1] if self.partial_history else None
        responses = last.responses if isinstance(last, ToolResponseMessage) else ()
        text = responses[-1].response_data if responses else str(self)
        return Generation(
            AssistantMessage(text),
            ChatGenerationMetadata(
                self.FINISH_REASON, {self.METADATA_PARTIAL_TOOL_RESPONSES: tuple(responses[:-1])}
            ),
        )


class GuardBlockedError(RuntimeError):
    """Raised when a guard rail that runs inside the chain (``documents``, ``tool_arguments``,
    ``tool_results``) blocks the turn.

    The ``GuardAdvisor`` that owns the rail catches it and answers with its refusal (code
    ``guard_blocked``); it propagates only from a chain whose guard sits inside the advisor
    that screened (the Django layer then maps it to the ``guard_blocked`` error). ``rail`` and
    ``check`` name what blocked; ``screening`` is the rail's ``Screening``.
    """

    code = "guard_blocked"

    def __init__(self, rail: str, check: str, screening: Any = None) -> None:
        super().__init__(f"the guard check {check!r} blocked the turn on the {rail} rail")
        self.rail = rail
        self.check = check
        self.screening = screening


class ProviderError(Exception):
    """Raised when a chat or embedding model provider fails; keeps its HTTP status and body.

    ``message`` is the provider's own error message when it sent one (for example
    ``{"error": {"message": ...}}``), otherwise a description of the fault.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: Any = None,
        provider: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body
        self.provider = provider

    def __str__(self) -> str:
        prefix = f"[{self.status}] " if self.status is not None else ""
        return f"{prefix}{self.message}"


class BadRequestError(ProviderError):
    """Raised when the provider rejects the request itself (HTTP 400, 404, 409, 422 ...)."""


class AuthenticationError(ProviderError):
    """Raised when the provider refuses the credentials (HTTP 401 or 403)."""


class ModelFailure(ProviderError):
    """Base of transient model faults: the ones ``FallbackAdvisor`` may switch models on."""


class ProviderTimeoutError(ModelFailure):
    """Raised when the provider did not answer within the configured timeout."""


class ProviderConnectionError(ModelFailure):
    """Raised when the provider could not be reached (refused, reset, DNS)."""


class RateLimitedError(ModelFailure):
    """Raised on HTTP 429; ``retry_after`` holds the server's hint in seconds, if any."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("status", 429)
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ProviderUnavailableError(ModelFailure):
    """Raised on HTTP 5xx: the provider is down or overloaded."""


class MalformedResponseError(ModelFailure):
    """Raised when a response or stream is cut short or cannot be parsed."""
