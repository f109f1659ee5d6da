"""Server-Sent Events against a real ASGI server (Daphne), read by a real HTTP client (httpx)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from rest_framework.authtoken.models import Token

from advisors_app.models import CallLog, ChatMessage
from tests.factories import make_chain, scripted_model
from tests.helpers import without_outcome

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def headers(user: Any) -> dict[str, str]:
    token, _ = Token.objects.get_or_create(user=user)
    return {"Authorization": f"Token {token.key}", "Accept": "text/event-stream"}


def events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(type, data)`` of each event, as the server sends them."""
    kind = data = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            data = json.loads(line.removeprefix("data: "))
        elif not line and kind is not None:
            assert data is not None and data["type"] == kind
            yield kind, data
            kind = data = None


def transcript(key: str) -> list[tuple[str, str, dict]]:
    rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
    return [(r.message_type, r.text, without_outcome(r.metadata)) for r in rows]


def test_a_stream_arrives_event_by_event(live_api: str, alice: Any) -> None:
    model = scripted_model("sse-model", responses=[["Hel", "lo", " there"]])
    # Chunks further apart than delta coalescing waits (40 ms): each is an event of its own.
    model.settings["chunk_delay"] = 0.1
    model.save()
    chain = make_chain("sse", model=model)
    with httpx.stream(
        "POST",
        f"{live_api}/api/chains/{chain.slug}/stream/",
        json={"message": "hi", "conversation_id": "live-1"},
        headers=headers(alice),
        timeout=30,
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert response.headers["cache-control"] == "no-cache"
        assert response.headers["x-accel-buffering"] == "no"
        received = list(events(response))
    assert [kind for kind, _ in received] == ["start", "delta", "delta", "delta", "done"]
    assert received[0][1]["conversation_id"] == "live-1"
    assert "".join(data["text"] for kind, data in received if kind == "delta") == "Hello there"
    done = received[-1][1]
    assert (done["reason"], done["content"]) == ("complete", "Hello there")
    assert transcript(f"{alice.pk}:live-1") == [
        ("user", "hi", {}),
        ("assistant", "Hello there", {"trace_id": received[0][1]["trace_id"]}),
    ]
    assert CallLog.objects.get().status == "ok"


def test_refused_input_is_json_before_any_event(live_api: str, alice: Any) -> None:
    chain = make_chain("sse-refused", model=scripted_model("refused-model"))
    url = f"{live_api}/api/chains/{chain.slug}/stream/"
    refused = httpx.post(url, json={"message": " "}, headers=headers(alice), timeout=30)
    assert refused.status_code == 400
    assert refused.headers["content-type"] == "application/json"
    assert refused.json()["error"]["fields"] == {"message": ["This field may not be blank."]}
    anonymous = httpx.post(url, json={"message": "hi"}, timeout=30)
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "not_authenticated"
    for path in ("/api/nothing-here/", "/api/chains/a%0Ab/call/"):
        unknown = httpx.post(f"{live_api}{path}", json={}, timeout=30)
        assert unknown.status_code == 404
        assert unknown.json()["error"]["code"] == "not_found"
    assert not CallLog.objects.exists()


def test_a_client_disconnect_stops_the_model_and_stores_the_turn_as_interrupted(
    live_api: str, alice: Any
) -> None:
    # 50 chunks, 0.1 s apart: five seconds if nobody stops the model.
    model = scripted_model("slow-model", responses=[["x"] * 50])
    model.settings["chunk_delay"] = 0.1
    model.save()
    chain = make_chain("sse-slow", model=model)
    with httpx.stream(
        "POST",
        f"{live_api}/api/chains/{chain.slug}/stream/",
        json={"message": "tell me everything", "conversation_id": "cut"},
        headers=headers(alice),
        timeout=30,
    ) as response:
        seen = []
        for kind, _ in events(response):
            seen.append(kind)
            if kind == "delta":
                break
    # Leaving the block closed the connection mid-stream.
    assert seen == ["start", "delta"]

    log = None
    hang_guard = time.monotonic() + 60  # only so a broken server fails instead of hanging
    while log is None:
        assert time.monotonic() < hang_guard, "the turn was never stored"
        log = CallLog.objects.filter(chain_slug=chain.slug).first()
        time.sleep(0.05)
    assert log.status == "cancelled"
    [(_, question, _), (kind, partial, metadata)] = transcript(f"{alice.pk}:cut")
    assert (question, kind) == ("tell me everything", "assistant")
    assert 1 <= len(partial) < 50 and set(partial) == {"x"}  # stopped, not run to the end
    assert metadata == {"interrupted": True, "finish_reason": "cancelled", "trace_id": log.trace_id}
