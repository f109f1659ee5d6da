"""Per-user throttling of chat turns: 429 with Retry-After, shared by call, stream and websocket."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from advisors_app.turn.throttling import chat_turn_wait
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chain() -> Any:
    return make_chain(model=scripted_model("throttled", responses=["ok"]))


@override_settings(ADVISORS={"CHAT_THROTTLE_RATE": "2/minute"})
def test_a_user_over_the_rate_gets_429_with_retry_after(
    chain: Any, api: Any, alice: Any, bob: Any
) -> None:
    call = f"/api/chains/{chain.slug}/call/"
    assert api.post(call, {"message": "one"}, format="json").status_code == 200
    # Refused input does not use up the rate: only valid turns are counted.
    for _ in range(3):
        assert api.post(call, {"message": " "}, format="json").status_code == 400
    assert api.post(call, {"message": "two"}, format="json").status_code == 200
    for url in (call, f"/api/chains/{chain.slug}/stream/"):
        throttled = api.post(url, {"message": "three"}, format="json")
        assert throttled.status_code == 429
        wait = int(throttled["Retry-After"])
        assert 0 < wait <= 60
        error = throttled.json()["error"]
        assert error["code"] == "throttled" and 0 < error["retry_after"] <= 60
        assert error["message"].startswith("Too many messages: try again in ")
    # The budget is per user, and other endpoints are not throttled.
    assert client_for(bob).post(call, {"message": "hi"}, format="json").status_code == 200
    assert api.get("/api/conversations/").status_code == 200
    # The websocket consumer spends the same budget.
    assert chat_turn_wait(alice) > 0
    assert chat_turn_wait(bob) is None


@override_settings(ADVISORS={"CHAT_THROTTLE_RATE": ""})
def test_an_empty_rate_turns_throttling_off(chain: Any, api: Any, alice: Any) -> None:
    for _ in range(5):
        response = api.post(f"/api/chains/{chain.slug}/call/", {"message": "x"}, format="json")
        assert response.status_code == 200
    assert chat_turn_wait(alice) is None
