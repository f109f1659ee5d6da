"""Budgets and the chat rate on the AG-UI and AI SDK endpoints: the turn's own limits, answered
as the SSE stream answers them — a refusal before the stream opens is a 429 JSON error with
``Retry-After``; one inside the chain ends the stream (``RUN_ERROR`` / an ``error`` part); a
soft limit is a warning event."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django.test import override_settings

from advisors_app.models import Budget, CallLog
from tests.api.views.test_ag_ui import parse_ag_ui, run_body
from tests.api.views.test_ai_sdk import chat_body, parse_parts
from tests.api.views.test_budget_transports import (  # noqa: F401 - fixtures
    LARGE,
    assert_refusal,
    chain,
    fresh_prices_and_budgets,
    nearly_used_up,
    used_up,
    watched,
)
from tests.api.views.test_chat import read_stream

pytestmark = pytest.mark.django_db(transaction=True)

URLS = {"ag-ui": run_body("hi"), "ai-sdk": chat_body("hi")}


@pytest.mark.parametrize("protocol", URLS)
def test_a_used_up_budget_is_a_429_before_the_stream_opens(
    chain: Any,  # noqa: F811
    used_up: Budget,  # noqa: F811
    api: Any,
    protocol: str,
) -> None:
    response = api.post(f"/api/chains/{chain.slug}/{protocol}/", URLS[protocol], format="json")
    assert response.status_code == 429
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert_refusal(error, used_up)
    assert response["Retry-After"] == str(math.ceil(error["retry_after"]))
    assert not CallLog.objects.exists()


def test_ag_ui_refused_inside_the_chain_is_a_run_error(
    chain: Any,  # noqa: F811
    nearly_used_up: Budget,  # noqa: F811
    api: Any,
) -> None:
    body = run_body("hi", forwardedProps=LARGE)
    response = api.post(f"/api/chains/{chain.slug}/ag-ui/", body, format="json")
    events = [event for _, event in parse_ag_ui(read_stream(response))]
    assert [e.type.value for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1].code == "budget_exceeded"


def test_ai_sdk_refused_inside_the_chain_is_an_error_part(
    chain: Any,  # noqa: F811
    nearly_used_up: Budget,  # noqa: F811
    api: Any,
) -> None:
    body = chat_body("hi", **LARGE)
    response = api.post(f"/api/chains/{chain.slug}/ai-sdk/", body, format="json")
    parts = parse_parts(read_stream(response))
    assert [p["type"] for p in parts] == ["start", "error", "finish"]
    assert "resets at" in parts[1]["errorText"]


def test_a_soft_limit_is_a_warning_on_both(
    chain: Any,  # noqa: F811
    watched: Budget,  # noqa: F811
    api: Any,
) -> None:
    response = api.post(f"/api/chains/{chain.slug}/ag-ui/", run_body("hi"), format="json")
    events = [event for _, event in parse_ag_ui(read_stream(response))]
    assert (events[1].type.value, events[1].name) == ("CUSTOM", "budget_warning")
    assert events[1].value["budget"] == "watch"
    assert events[-1].result["budget_warnings"] == [events[1].value]

    response = api.post(f"/api/chains/{chain.slug}/ai-sdk/", chat_body("hi"), format="json")
    parts = parse_parts(read_stream(response))
    assert parts[1]["type"] == "data-budget-warning" and parts[1]["transient"] is True
    assert parts[1]["data"]["budget"] == "watch"


@override_settings(ADVISORS={"CHAT_THROTTLE_RATE": "2/minute"})
def test_the_chat_rate_counts_turns_of_every_protocol(
    chain: Any,  # noqa: F811
    api: Any,
) -> None:
    for protocol, body in URLS.items():
        response = api.post(f"/api/chains/{chain.slug}/{protocol}/", body, format="json")
        assert response.status_code == 200 and "Fine." in read_stream(response)
    for protocol, body in URLS.items():
        response = api.post(f"/api/chains/{chain.slug}/{protocol}/", body, format="json")
        assert response.status_code == 429
        assert response.json()["error"]["code"] == "throttled"
