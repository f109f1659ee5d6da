"""Rates of the requests that are not turns, and sockets per user (issue 36, "Smaller"):
votes (REST and websocket ``feedback`` frames share ``FEEDBACK_THROTTLE_RATE``), stream resumes
(SSE and websocket ``resume`` frames share ``RESUME_THROTTLE_RATE``), and chat sockets open at
once (``MAX_SOCKETS_PER_USER``, counted in Redis across processes).

No wall clock: the rates are a few requests per minute, and each test sends more than that at
once; every test starts with an empty throttle cache.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.test import AsyncClient, override_settings

from advisors_app.channels.consumers import CLOSE_TOO_MANY_FRAMES
from advisors_app.channels.sockets import RedisSocketSlots
from advisors_app.conf import app_settings
from tests.test_consumers import open_socket
from tests.test_consumers_redis import redis_answers

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("ADVISORS_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")


@pytest.fixture(autouse=True)
def fresh_throttles() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


async def client_of(user: Any) -> AsyncClient:
    client = AsyncClient()
    await client.aforce_login(user)
    return client


def test_the_new_limits_are_on_by_default() -> None:
    assert app_settings.FEEDBACK_THROTTLE_RATE == "60/minute"
    assert app_settings.RESUME_THROTTLE_RATE == "30/minute"
    assert app_settings.MAX_SOCKETS_PER_USER == 20


def assert_throttled(body: dict[str, Any], setting: str, what: str) -> None:
    assert body["code"] == "throttled" and 0 < body["retry_after"] <= 60
    assert body["message"].startswith(f"Too many {what}: try again in ")
    assert setting in body["message"]


@override_settings(ADVISORS={"FEEDBACK_THROTTLE_RATE": "3/minute"})
async def test_votes_over_the_rate_are_refused_over_rest_and_websocket(
    alice: Any, bob: Any
) -> None:
    api = await client_of(alice)
    url = "/api/messages/{}/feedback/"
    # Every vote counts, stored or refused: a vote on a message that is nobody's is a 404.
    assert (await api.put(url.format(999), {"value": True}, "application/json")).status_code == 404
    assert (await api.delete(url.format(999))).status_code == 404
    socket = await open_socket(alice, slug="anything")
    await socket.send_json_to({"type": "feedback", "message_id": 999, "value": True})
    assert (await socket.receive_json_from(timeout=5))["code"] == "not_found"
    # The fourth, on either transport, is over the shared rate.
    refused = await api.put(url.format(999), {"value": True}, "application/json")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert_throttled(refused.json()["error"], "FEEDBACK_THROTTLE_RATE", "votes")
    await socket.send_json_to({"type": "feedback", "message_id": 999, "value": True})
    frame = await socket.receive_json_from(timeout=5)
    assert frame["type"] == "error" and frame["in_reply_to"] == "feedback"
    assert frame["message_id"] == 999
    assert_throttled(frame, "FEEDBACK_THROTTLE_RATE", "votes")
    # The socket stays usable, and the rate is per user.
    await socket.send_json_to({"type": "bogus"})
    assert (await socket.receive_json_from(timeout=5))["code"] == "invalid"
    await socket.disconnect()
    other = await client_of(bob)
    assert (
        await other.put(url.format(999), {"value": True}, "application/json")
    ).status_code == 404


@override_settings(ADVISORS={"RESUME_THROTTLE_RATE": "2/minute"})
async def test_resumes_over_the_rate_are_refused_over_sse_and_websocket(
    alice: Any, bob: Any
) -> None:
    api = await client_of(alice)
    url = "/api/chains/any/stream/"

    def resume(**body: Any) -> Any:
        return api.post(url, {"resume": True, **body}, content_type="application/json")

    # A malformed resume is refused before it counts; one that finds nothing counts.
    assert (await resume(conversation_id="c" * 200)).status_code == 400
    assert (await resume(conversation_id="gone")).status_code == 404
    socket = await open_socket(alice, slug="any")
    await socket.send_json_to({"type": "resume", "conversation_id": "gone"})
    assert (await socket.receive_json_from(timeout=5))["code"] == "not_found"
    refused = await resume(conversation_id="gone")
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 60
    assert_throttled(refused.json()["error"], "RESUME_THROTTLE_RATE", "resumes")
    await socket.send_json_to({"type": "resume", "conversation_id": "gone"})
    frame = await socket.receive_json_from(timeout=5)
    assert (frame["type"], frame["in_reply_to"], frame["conversation_id"]) == (
        "error",
        "resume",
        "gone",
    )
    assert_throttled(frame, "RESUME_THROTTLE_RATE", "resumes")
    await socket.disconnect()
    other = await client_of(bob)
    answer = await other.post(
        url, {"resume": True, "conversation_id": "gone"}, content_type="application/json"
    )
    assert answer.status_code == 404


async def refused_socket(user: Any) -> dict[str, Any]:
    """The frames and close code of a socket refused for too many open ones."""
    communicator = await open_socket(user, slug="any")
    frame = await communicator.receive_json_from(timeout=5)
    closed = await communicator.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_TOO_MANY_FRAMES}
    await communicator.wait()
    return frame


@override_settings(ADVISORS={"MAX_SOCKETS_PER_USER": 2})
async def test_sockets_past_the_limit_are_closed_with_4429(alice: Any, bob: Any) -> None:
    first = await open_socket(alice, slug="any")
    second = await open_socket(alice, slug="other")
    frame = await refused_socket(alice)
    assert frame["type"] == "error" and frame["code"] == "too_many_sockets"
    assert "MAX_SOCKETS_PER_USER" in frame["message"]
    # Per user; and a socket that closes gives its place back at once.
    third_party = await open_socket(bob, slug="any")
    await first.disconnect()
    again = await open_socket(alice, slug="any")
    await again.send_json_to({"type": "bogus"})  # a socket that is served, not refused
    assert (await again.receive_json_from(timeout=5))["code"] == "invalid"
    assert (await refused_socket(alice))["code"] == "too_many_sockets"
    for communicator in (second, third_party, again):
        await communicator.disconnect()


@override_settings(ADVISORS={"MAX_SOCKETS_PER_USER": 0})
async def test_no_socket_limit_with_zero(alice: Any) -> None:
    sockets = [await open_socket(alice, slug="any") for _ in range(25)]
    await sockets[-1].send_json_to({"type": "bogus"})
    assert (await sockets[-1].receive_json_from(timeout=5))["code"] == "invalid"
    for communicator in sockets:
        await communicator.disconnect()


async def test_redis_slots_are_shared_by_processes_and_a_dead_ones_lapse() -> None:
    """Two slot stores on one Redis stand for two server processes; a lease of 0 s for a
    process that died before renewing (it has lapsed by the next count)."""
    if not redis_answers(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL}")
    prefix = f"advisors-test-{uuid.uuid4().hex}"
    one, two = RedisSocketSlots(REDIS_URL, prefix), RedisSocketSlots(REDIS_URL, prefix)
    assert await one.acquire(7, "a", 2)
    assert await two.acquire(7, "b", 2)
    assert not await two.acquire(7, "c", 2)
    assert not await one.acquire(7, "c", 2)
    assert await one.acquire(8, "c", 2)  # another user
    assert await two.acquire(7, "a", 2)  # a renewal of a held slot always succeeds
    await one.release(7, "a")
    assert await two.acquire(7, "c", 2)
    dead = RedisSocketSlots(REDIS_URL, prefix, lease=0)
    await dead.renew(9, "x")
    await dead.renew(9, "y")
    assert await one.acquire(9, "z", 1)
    for owner, socket in ((7, "b"), (7, "c"), (8, "c"), (9, "z")):
        await one.release(owner, socket)


async def test_unauthenticated_sockets_take_no_place(alice: Any) -> None:
    with override_settings(ADVISORS={"MAX_SOCKETS_PER_USER": 1}):
        anonymous = await open_socket(None, slug="any")
        assert (await anonymous.receive_json_from(timeout=5))["code"] == "not_authenticated"
        mine = await open_socket(alice, slug="any")
        await mine.send_json_to({"type": "bogus"})
        assert (await mine.receive_json_from(timeout=5))["code"] == "invalid"
        await mine.disconnect()


class Clock:
    """A clock the test moves (the frame budget never reads the wall clock here)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    from advisors_app.channels import frame_rate

    fixed = Clock()
    monkeypatch.setattr(frame_rate, "clock", fixed)
    return fixed


@override_settings(ADVISORS={"WEBSOCKET_FRAME_BURST": 5, "WEBSOCKET_FRAME_RATE": 2})
async def test_a_socket_flooding_any_frames_is_closed_past_its_budget(
    alice: Any, clock: Clock
) -> None:
    """Found by the security pass: invalid frames (answered at once, never read) queued in
    daphne and Twisted without bound; only resumes and votes were bounded."""
    socket = await open_socket(alice, slug="any")
    for _ in range(5):
        await socket.send_json_to({"nope": 1})
        assert (await socket.receive_json_from(timeout=5))["code"] == "invalid"
    clock.now += 1.0  # two more frames' worth
    for _ in range(2):
        await socket.send_json_to({"nope": 1})
        assert (await socket.receive_json_from(timeout=5))["code"] == "invalid"
    await socket.send_json_to({"type": "cancel"})  # valid frames count too
    refused = await socket.receive_json_from(timeout=5)
    assert refused["code"] == "too_many_frames" and "WEBSOCKET_FRAME_RATE" in refused["message"]
    closed = await socket.receive_output(timeout=5)
    assert closed == {"type": "websocket.close", "code": CLOSE_TOO_MANY_FRAMES}
    await socket.wait()


@override_settings(ADVISORS={"WEBSOCKET_FRAME_BURST": 2, "WEBSOCKET_FRAME_RATE": 0})
async def test_no_frame_budget_with_a_zero_rate(alice: Any, clock: Clock) -> None:
    socket = await open_socket(alice, slug="any")
    for _ in range(10):
        await socket.send_json_to({"nope": 1})
        assert (await socket.receive_json_from(timeout=5))["code"] == "invalid"
    await socket.disconnect()
