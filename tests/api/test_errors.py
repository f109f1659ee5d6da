"""The one error shape: every exception a view raises becomes ``{"error": {...}}``; chat bodies
that are not JSON or lack a message get errors that say what to send."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions

from advisors_app.api.errors import api_exception_handler, error_body, flatten_errors
from advisors_app.core import AuthenticationError, MalformedResponseError
from advisors_app.turn.events import TurnError
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

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


# -- chat bodies (issue 24) ------------------------------------------------------------------


@pytest.fixture
def chat(alice: Any) -> Any:
    make_chain("helper", model=scripted_model("helper-model", responses=["ok", "ok"]))
    return client_for(alice)


@pytest.mark.django_db
@pytest.mark.parametrize("body", [{}, {"message": None}, {"conversation_id": "x"}])
def test_a_chat_turn_without_a_message_says_it_is_required(chat: Any, body: Any) -> None:
    response = chat.post("/api/chains/helper/call/", body, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["fields"] == {"message": ["This field is required."]}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("message=hi", "application/x-www-form-urlencoded"),
        ('{"message": "hi"}', "text/plain"),
        ("--b\r\n", "multipart/form-data; boundary=b"),
    ],
)
@pytest.mark.parametrize("endpoint", ["call", "stream"])
def test_a_chat_body_that_is_not_json_is_415_saying_to_send_json(
    chat: Any, body: str, content_type: str, endpoint: str
) -> None:
    response = chat.generic(
        "POST", f"/api/chains/helper/{endpoint}/", body, content_type=content_type
    )
    assert response.status_code == 415
    error = response.json()["error"]
    sent = content_type.split(";")[0]
    assert error["code"] == "unsupported_media_type"
    assert error["message"] == (
        f"Send the request body as application/json (Content-Type: application/json), not {sent}."
    )


@pytest.mark.django_db
def test_a_chat_body_as_json_with_a_charset_or_without_a_content_type_runs(chat: Any) -> None:
    for content_type in ("application/json; charset=utf-8", ""):
        response = chat.generic(
            "POST", "/api/chains/helper/call/", '{"message": "hi"}', content_type=content_type
        )
        assert (response.status_code, response.json()["content"]) == (200, "ok")
