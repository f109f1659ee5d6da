"""What the OpenAI-compatible chat and embedding models share: the SDK client and error mapping.

Every fault of the ``openai`` SDK becomes one of the provider errors of
:mod:`advisors_app.core.exceptions`, with the HTTP status, the provider's error body and its own
message kept, the same way for calls and streams (bug case B32).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import math
import os
import threading
import time
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..exceptions import (
    AuthenticationError,
    BadRequestError,
    MalformedResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitedError,
)

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["ClientSettings", "map_openai_error", "parse_retry_after"]

#: Sent as the key to servers that need none (a local llama.cpp, vLLM or Ollama). The SDK
#: refuses to start without a key, and an empty bearer token is rejected by some proxies.
NO_KEY = "no-key"


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds to wait from ``Retry-After-Ms`` / ``Retry-After`` (seconds or an HTTP date).

    Returns ``None`` when neither header is present or parseable; a date in the past gives ``0``.
    """
    if not headers:
        return None
    for name, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) / divisor
        except ValueError:
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return seconds
    value = headers.get("retry-after")
    if value:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        return max(0.0, when.timestamp() - time.time())
    return None


def _provider_message(body: Any, fallback: str) -> str:
    """The provider's own error text: ``{"message": ...}`` (the SDK unwraps ``{"error": ...}``)."""
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            message = inner.get("message")
            if isinstance(message, str) and message:
                return message
        elif isinstance(inner, str) and inner:
            return inner
    if isinstance(body, str) and body.strip():
        return body.strip()[:2000]
    return fallback


def _error_for_status(
    status: int, message: str, body: Any, provider: str, headers: Mapping[str, str] | None
) -> ProviderError:
    if status == 429:
        return RateLimitedError(
            message,
            retry_after=parse_retry_after(headers),
            status=status,
            body=body,
            provider=provider,
        )
    kind: type[ProviderError]
    if status in (401, 403):
        kind = AuthenticationError
    elif status == 408:
        kind = ProviderTimeoutError
    elif status >= 500:
        kind = ProviderUnavailableError
    elif status >= 400:
        kind = BadRequestError
    else:
        kind = ProviderError
    return kind(message, status=status, body=body, provider=provider)


# Error "type"/"code" values that servers put in an error event sent inside a 200 stream.
_STREAM_ERROR_TYPES: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "rate_limit_error": 429,
    "rate_limit_exceeded": 429,
    "insufficient_quota": 429,
    "server_error": 500,
    "overloaded_error": 503,
    "unavailable_error": 503,
}


def _status_in_body(body: Any) -> int | None:
    if not isinstance(body, Mapping):
        return None
    code = body.get("code")
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    if isinstance(code, str) and code.isdigit() and 400 <= int(code) <= 599:
        return int(code)
    for key in ("type", "code"):
        value = body.get(key)
        if isinstance(value, str) and value in _STREAM_ERROR_TYPES:
            return _STREAM_ERROR_TYPES[value]
    return None


def map_openai_error(
    exc: BaseException, provider: str, *, streaming: bool = False
) -> BaseException:
    """The provider error for an exception raised by the ``openai`` SDK (others unchanged).

    Mapping: HTTP 429 → :class:`RateLimitedError` (``retry_after`` from the headers);
    401/403 → :class:`AuthenticationError`; 408 and client-side timeouts →
    :class:`ProviderTimeoutError`; other 4xx → :class:`BadRequestError`; 5xx →
    :class:`ProviderUnavailableError`; unreachable server → :class:`ProviderConnectionError`;
    a connection lost while a stream was being read (``streaming=True``), an error event inside
    a stream with no recognisable status, a chunk that is not JSON, or a body that does not match
    the API → :class:`MalformedResponseError`. The provider's message, status and body are kept.
    """
    import openai

    if isinstance(exc, ProviderError):
        return exc
    if isinstance(exc, openai.APITimeoutError):
        return ProviderTimeoutError(
            "the provider did not answer within the timeout", provider=provider
        )
    if isinstance(exc, openai.APIConnectionError):
        if streaming:
            return MalformedResponseError(
                f"the stream was cut before it ended ({exc.__cause__ or exc})", provider=provider
            )
        return ProviderConnectionError(
            f"the provider could not be reached ({exc.__cause__ or exc})", provider=provider
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return MalformedResponseError(
            exc.message, status=exc.status_code, body=exc.body, provider=provider
        )
    if isinstance(exc, openai.APIStatusError):
        body = exc.body
        message = _provider_message(body, exc.message)
        return _error_for_status(exc.status_code, message, body, provider, exc.response.headers)
    if isinstance(exc, openai.APIError):
        # An error event sent inside a stream that had already answered 200.
        status = _status_in_body(exc.body)
        message = _provider_message(exc.body, exc.message)
        if status is None:
            return MalformedResponseError(message, body=exc.body, provider=provider)
        return _error_for_status(status, message, exc.body, provider, None)
    if isinstance(exc, json.JSONDecodeError):
        return MalformedResponseError(
            f"the provider sent a chunk that is not JSON: {exc}", body=exc.doc, provider=provider
        )
    if isinstance(exc, openai.OpenAIError):
        return ProviderError(str(exc), provider=provider)
    return exc


class ClientSettings:
    """Connection settings of one model and its SDK clients, one per event loop.

    An ``httpx`` connection pool belongs to the event loop that opened it, and core objects may
    be used from several loops (one per thread with the sync facades), so each loop gets its
    own :class:`openai.AsyncOpenAI` (~20 ms to build, then reused: connections stay open). The
    key is read from ``api_key_env`` at each use — never stored on the model nor logged — so a
    rotated key takes effect on the next call.
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        api_key: str | None,
        api_key_env: str | None,
        timeout: float | None,
        max_retries: int,
        provider: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries!r}")
        self.base_url = base_url
        self._api_key = api_key
        self.api_key_env = api_key_env
        self.timeout = timeout
        self.max_retries = max_retries
        self.provider = provider
        self.headers = dict(headers or {})
        self._lock = threading.Lock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncOpenAI] = (
            weakref.WeakKeyDictionary()
        )

    def api_key(self) -> str:
        """The key to send; raises :class:`AuthenticationError` when ``api_key_env`` is unset."""
        if self._api_key is not None:
            return self._api_key
        if self.api_key_env:
            value = os.environ.get(self.api_key_env, "")
            if not value:
                raise AuthenticationError(
                    f"the environment variable {self.api_key_env} holding the API key of "
                    f"{self.provider!r} is not set",
                    provider=self.provider,
                )
            return value
        return NO_KEY

    async def client(self, base_url: str | None = None, api_key: str | None = None) -> AsyncOpenAI:
        """This event loop's SDK client (``base_url``/``api_key`` override the configured ones).

        A client whose URL or key no longer matches (a rotated key) is replaced and closed.
        """
        from openai import AsyncOpenAI

        loop = asyncio.get_running_loop()
        url = base_url or self.base_url
        key = api_key or self.api_key()
        with self._lock:
            client = self._clients.get(loop)
            if client is not None and client.api_key == key and _same_url(client, url):
                return client
            replaced = client
            client = AsyncOpenAI(
                api_key=key,
                base_url=url,
                timeout=self.timeout,
                max_retries=self.max_retries,
                default_headers=self.headers or None,
            )
            self._clients[loop] = client
        if replaced is not None:
            await replaced.close()
        return client


def _same_url(client: AsyncOpenAI, url: str | None) -> bool:
    return url is None or str(client.base_url).rstrip("/") == url.rstrip("/")
