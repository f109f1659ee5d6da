"""The ``ADVISORS["OPENTELEMETRY"]`` setting's check (``advisors_app.E015``).

``False`` (off), ``True`` (the OTLP exporter reads the ``OTEL_*`` environment variables) or a
dict ``{"endpoint": "http(s)://host:port", "service_name"?: str, "headers"?: {str: str},
"timeout"?: seconds}``. Messages name a field, never show a value: headers carry API keys.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.core.checks import CheckMessage, Error

__all__ = ["FIELDS", "opentelemetry_errors"]

#: The dict form's fields and their types.
FIELDS: dict[str, type | tuple[type, ...]] = {
    "endpoint": str,
    "service_name": str,
    "headers": dict,
    "timeout": (int, float),
}

_HINT = (
    'Set ADVISORS["OPENTELEMETRY"] to False, True (the OTEL_* environment variables), or '
    '{"endpoint": "http://127.0.0.1:4318", "service_name"?: "advisors", "headers"?: {...}, '
    '"timeout"?: 10} (docs/observability.md).'
)
_NAME = 'settings.ADVISORS["OPENTELEMETRY"]'


def _error(problem: str) -> Error:
    return Error(f"{_NAME}: {problem}", hint=_HINT, id="advisors_app.E015")


def opentelemetry_errors(value: Any) -> list[CheckMessage]:
    """E015 for each problem of the setting's ``value`` (none when it is fine)."""
    if isinstance(value, bool):
        return []
    if not isinstance(value, dict):
        return [_error(f"must be a bool or a dict, got a {type(value).__name__}.")]
    errors: list[CheckMessage] = []
    for key, item in value.items():
        expected = FIELDS.get(key)
        if expected is None:
            errors.append(_error(f"unknown field {key!r}."))
        elif isinstance(item, bool) or not isinstance(item, expected):
            errors.append(_error(f"field {key!r} has the wrong type ({type(item).__name__})."))
    if "endpoint" not in value:
        errors.append(_error('needs an "endpoint".'))
    elif isinstance(value["endpoint"], str):
        url = urlsplit(value["endpoint"])
        if url.scheme not in ("http", "https") or not url.netloc:
            errors.append(_error('"endpoint" must be an http(s) URL (scheme, host, port).'))
    headers = value.get("headers")
    if isinstance(headers, dict) and not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        errors.append(_error('"headers" must map strings to strings.'))
    timeout = value.get("timeout")
    if isinstance(timeout, int | float) and not isinstance(timeout, bool) and timeout <= 0:
        errors.append(_error('"timeout" must be above 0 seconds.'))
    return errors
