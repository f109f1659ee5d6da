"""The one error shape: every exception a view raises becomes ``{"error": {...}}``."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions

from advisors_app.api.errors import api_exception_handler, error_body, flatten_errors
from advisors_app.core import AuthenticationError, MalformedResponseError
from advisors_app.events import TurnError

KEYS = {"code", "message", "fields", "provider_status", "retry_after", "conversation_id"}
KEYS |= {"trace_id"}


def test_nested_validation_errors_become_dotted_field_paths() -> None:
    detail = {
        "name": ["Required."],
        "advisors": [{}, {"params": {"top_k": ["Too small."]}, "order": ["Bad.", "Worse."]}],
        "non_field_errors": ["Nope."],
    }
    assert flatten_errors(detail) == {
        "name": ["Required."],
        "advisors.1.params.top_k": ["Too small."],
        "advisors.1.order": ["Bad.", "Worse."],
        "non_field_errors": ["Nope."],
    }


@pytest.mark.parametrize(
    ("exc", "status", "code", "message"),
    [
        (Http404("No such thing."), 404, "not_found", "No such thing."),
        (PermissionDenied("Not yours."), 403, "permission_denied", "Not yours."),
        (exceptions.ParseError("JSON parse error - x"), 400, "parse_error", "JSON parse error - x"),
        (exceptions.ValidationError({"a": ["b"]}), 400, "invalid", "The request is invalid."),
        (
            TurnError("chain_misconfigured", "Chain 'x' cannot run: y", http_status=500),
            500,
            "chain_misconfigured",
            "Chain 'x' cannot run: y",
        ),
        (AuthenticationError("bad key", status=401), 502, "provider_authentication", "bad key"),
        (MalformedResponseError("cut short"), 502, "provider_malformed_response", "cut short"),
        (KeyError("secret"), 500, "internal_error", "The server could not complete this request."),
    ],
)
def test_every_exception_gets_the_one_shape(
    exc: Exception, status: int, code: str, message: str
) -> None:
    response = api_exception_handler(exc, {})
    assert response.status_code == status
    error: dict[str, Any] = response.data["error"]
    assert set(error) == KEYS
    assert (error["code"], error["message"]) == (code, message)


def test_throttling_sends_retry_after() -> None:
    response = api_exception_handler(exceptions.Throttled(wait=12.2), {})
    assert response.status_code == 429 and response["Retry-After"] == "13"
    assert response.data["error"]["retry_after"] == 13  # DRF rounds up


def test_error_body_defaults() -> None:
    assert error_body("not_found", "Gone.") == {
        "error": {
            "code": "not_found",
            "message": "Gone.",
            "fields": {},
            "provider_status": None,
            "retry_after": None,
            "conversation_id": None,
            "trace_id": None,
        }
    }
