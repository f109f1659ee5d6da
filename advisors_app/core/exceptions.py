"""Exceptions raised by the advisor engine and its model providers.

The tree (Spring AI's IllegalArgumentException is Python's ``ValueError``)::

    Exception
    ├── AdvisorStateError (RuntimeError)   misuse: Spring's IllegalStateException
    ├── OutputValidationError (ValueError) structured output still invalid after every attempt
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

from typing import Any

__all__ = [
    "AdvisorStateError",
    "AuthenticationError",
    "BadRequestError",
    "MalformedResponseError",
    "ModelFailure",
    "OutputValidationError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "ProviderUnavailableError",
    "RateLimitedError",
]


class AdvisorStateError(RuntimeError):
    """Raised when the engine is misused: an exhausted chain, two tool advisors, a missing model."""


class OutputValidationError(ValueError):
    """Raised when structured output is still invalid after every retry (when asked to raise)."""

    def __init__(self, message: str, *, output: str | None = None, attempts: int = 0) -> None:
        super().__init__(message)
        self.output = output
        self.attempts = attempts


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
