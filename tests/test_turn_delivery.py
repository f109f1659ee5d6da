"""Delivery bugs a two-process websocket load found (issue 23): a resume past what the buffer
holds sends nothing twice; a send on a socket that just closed does not kill the turn; a
connection the server cancels after its client left (daphne's close timeout) leaves a
``continue`` turn running; the Redis layer waits for a free connection instead of failing."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from autobahn.exception import Disconnected
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from channels_redis.core import RedisChannelLayer as StockRedisChannelLayer
from django.test import override_settings
from redis.asyncio import BlockingConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError

from advisors_app.channels import consumers
from advisors_app.channels.redis_layer import RedisChannelLayer
from advisors_app.definition.runtime import clear_cache
from advisors_app.turn import buffer as tb
from advisors_app.turn import shutdown as server_shutdown
from advisors_app.turn.delivery import (
    DeltaCoalescer,
    cancelled_frames,
    nothing_to_resume,
    resume_errors,
)
from advisors_app.turn.events import DeltaEvent
from advisorsite.asgi import application
from advisorsite.settings import channel_layers
from tests.factories import make_chain, scripted_model
from tests.test_consumers import HOST, ORIGIN, frames_until_end, open_socket, script, session_cookie
from tests.test_turn_resume import ANSWER, WORDS, ids_of, wait_stored

pytestmark = pytest.mark.django_db(transaction=True)

IN_MEMORY = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

FAST = {"STREAM_COALESCE_MS": 0}
CONTINUE = {"DISCONNECT_POLICY": "continue", "STREAM_COALESCE_MS": 0}
REDIS_URL = "redis://127.0.0.1:6379/0"


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> Any:
    return make_chain(model=scripted_model("delivery", responses=(), repeat=False))


class LaggingBuffer(tb.InMemoryTurnBuffer):
    """The buffer of a loaded Redis: batches from the ``held``-th on are stored only once
    ``gate`` is set, long after the socket running the turn sent their frames."""

    def __init__(self, held: int) -> None:
        super().__init__(300)
        self.held = held
        self.gate = asyncio.Event()
        self.batches = 0

    async def append(self, owner: int, conversation_id: str, frames: list[dict[str, Any]]) -> None:
        self.batches += 1
        if self.batches >= self.held:
            await self.gate.wait()
        await super().append(owner, conversation_id, frames)


@pytest.fixture
def lagging(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(held: int) -> LaggingBuffer:
        buffer = LaggingBuffer(held)
        monkeypatch.setattr(tb, "turn_buffer", lambda: buffer)
        monkeypatch.setattr(consumers, "turn_buffer", lambda: buffer)
        return buffer

    return install


async def until_id(socket: Any, n: int) -> list[dict[str, Any]]:
    """The turn's frames up to event ``n`` (``conversation`` frames skipped)."""
    frames: list[dict[str, Any]] = []
    while not frames or ids_of(frames)[-1] < n:
        frame = await socket.receive_json_from(timeout=5)
        if frame["type"] != "conversation":
            frames.append(frame)
    return frames


async def resume_while_held(
    user: Any, conversation: str, before: list[dict[str, Any]], buffer: Any, delay: float
) -> tuple[Any, list[dict[str, Any]]]:
    """A new socket resumes ``conversation`` after the last of ``before`` while ``buffer``
    holds its batches back, released ``delay`` seconds later: the socket and its frames."""
    resumed = await open_socket(user)
    await resumed.send_json_to(
        {"type": "resume", "conversation_id": conversation, "last_event_id": before[-1]["event_id"]}
    )
    asyncio.get_running_loop().call_later(delay, buffer.gate.set)
    return resumed, await frames_until_end(resumed)


@pytest.mark.parametrize("held", [2, 1], ids=["buffer-behind", "buffer-empty"])
@override_settings(ADVISORS=FAST)
async def test_a_resume_past_what_the_buffer_holds_sends_nothing_twice(
    alice: Any, chain: Any, lagging: Any, held: int
) -> None:
    buffer = lagging(held)
    await script(chain.slug, WORDS, delay=0.02)
    talking = await open_socket(alice)
    await talking.send_json_to({"type": "message", "text": "count"})
    before = await until_id(talking, 6)  # the client had frames 1-6 when it dropped
    conversation = before[0]["conversation_id"]
    kept = await buffer.read(alice.pk, conversation)
    assert len(kept or []) < 6  # the buffer is behind what the client saw
    # The lagging batches land while (buffer-empty) or after (buffer-behind) the resume is
    # answered: they reach the resumed socket through its group too.
    resumed, after = await resume_while_held(alice, conversation, before, buffer, 0.2)
    own = before + await frames_until_end(talking)
    assert ids_of(after) == list(range(7, len(own) + 1))  # each once, nothing lost
    assert not any(f.get("resumed_elsewhere") for f in after)
    assert [f["event_id"] for f in before + after] == [f["event_id"] for f in own]
    await talking.disconnect()
    await resumed.disconnect()


def closes_after(count: int) -> Any:
    """The site's ASGI app on a socket that closes (under daphne: autobahn raises
    ``Disconnected``) after ``count`` frames were sent, before its disconnect is processed."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        sent = 0

        async def send_until_closed(message: dict[str, Any]) -> None:
            nonlocal sent
            if message["type"] == "websocket.send":
                sent += 1
                if sent > count:
                    raise Disconnected("Attempt to send on a closed protocol")
            await send(message)

        await application(scope, receive, send_until_closed)

    return app


async def open_closing_socket(user: Any, slug: str, count: int) -> Any:
    headers = [HOST, ORIGIN, await session_cookie(user)]
    socket = WebsocketCommunicator(closes_after(count), f"/ws/chat/{slug}/", headers=headers)
    connected, _ = await socket.connect()
    assert connected
    return socket


@pytest.mark.parametrize(("policy", "reason"), [("continue", "complete"), ("cancel", "cancelled")])
async def test_a_send_on_a_socket_that_just_closed_acts_as_a_disconnect(
    alice: Any, chain: Any, policy: str, reason: str
) -> None:
    with override_settings(ADVISORS={"DISCONNECT_POLICY": policy, "STREAM_COALESCE_MS": 0}):
        await script(chain.slug, WORDS, delay=0.02)
        socket = await open_closing_socket(alice, chain.slug, 3)
        await socket.send_json_to({"type": "message", "text": "count"})
        start = await socket.receive_json_from(timeout=5)
        conversation = start["conversation_id"]
        rows = await wait_stored(f"{alice.pk}:{conversation}")
        # What was published after the send failed: a resume gets the turn's end.
        other = await open_socket(alice, chain.slug)
        await other.send_json_to({"type": "resume", "conversation_id": conversation})
        replay = await frames_until_end(other)
        await other.disconnect()
        await socket.disconnect()
    assert replay[-1]["type"] == "done" and replay[-1]["reason"] == reason
    assert not any(f["type"] == "error" for f in replay)
    assert [kind for kind, _, _ in rows] == ["user", "assistant"]
    if policy == "continue":
        assert rows[1][1] == ANSWER and "interrupted" not in rows[1][2]
    else:
        assert len(rows[1][1]) < len(ANSWER) and rows[1][2].get("interrupted") is True


@override_settings(ADVISORS=CONTINUE)
async def test_continue_the_consumer_returns_at_once_and_the_turn_ends_whole(
    alice: Any, chain: Any
) -> None:
    await script(chain.slug, WORDS, delay=0.05)  # 0.6 s of answer
    socket = await open_socket(alice, chain.slug)
    await socket.send_json_to({"type": "message", "text": "count"})
    start = await socket.receive_json_from(timeout=5)
    await socket.disconnect(timeout=0.3)  # asgiref cancels an app still running by then
    assert socket.future.done() and not socket.future.cancelled()
    rows = await wait_stored(f"{alice.pk}:{start['conversation_id']}")
    assert [(kind, text) for kind, text, _ in rows] == [("user", "count"), ("assistant", ANSWER)]
    assert "interrupted" not in rows[1][2]


@pytest.mark.parametrize("shutting_down", [False, True], ids=["close-timeout", "shutdown"])
@override_settings(ADVISORS=CONTINUE)
async def test_continue_survives_daphnes_close_timeout_but_not_a_shutdown(
    alice: Any, chain: Any, monkeypatch: pytest.MonkeyPatch, shutting_down: bool
) -> None:
    monkeypatch.setattr(server_shutdown, "_stopping", shutting_down)
    await script(chain.slug, WORDS, delay=0.03)
    socket = await open_socket(alice, chain.slug)
    await socket.send_json_to({"type": "message", "text": "count"})
    start, *_ = await until_id(socket, 3)  # some text arrived: a stopped turn stores it
    # Daphne cancels an application that has not ended 10 s after its client left — and
    # every application when the server stops (after server_shutdown's hook ran).
    socket.future.cancel()
    with pytest.raises(asyncio.CancelledError):
        await socket.future
    assert not get_channel_layer().groups.get(tb.user_group(alice))  # left, not a dead channel
    rows = await wait_stored(f"{alice.pk}:{start['conversation_id']}")
    assert [kind for kind, _, _ in rows] == ["user", "assistant"]
    if shutting_down:
        assert rows[1][2].get("interrupted") is True
    else:
        assert rows[1][1] == ANSWER and "interrupted" not in rows[1][2]


async def test_the_redis_layer_waits_for_a_free_connection() -> None:
    """redis-py's pool raises "Too many connections" past ``max_connections``; the site's
    layer waits for one (``timeout``). Needs Redis on 127.0.0.1:6379."""
    host = {"address": REDIS_URL, "max_connections": 2}
    for layer_class, fails in ((StockRedisChannelLayer, True), (RedisChannelLayer, False)):
        options = host if fails else host | {"timeout": 5}
        layer = layer_class(hosts=[options], prefix=f"advisors-tests-{uuid.uuid4().hex}")
        channels = [await layer.new_channel() for _ in range(20)]
        sends = [layer.group_add("g", channel) for channel in channels]
        try:
            results = await asyncio.gather(*sends, return_exceptions=True)
            failures = [r for r in results if isinstance(r, RedisConnectionError)]
            assert bool(failures) is fails, results
            if not fails:
                await layer.group_send("g", {"type": "x"})
                assert await layer.receive(channels[-1]) == {"type": "x"}
        finally:
            await layer.flush()
            await layer.close_pools()


async def test_the_redis_layer_does_not_echo_a_turns_frames_to_their_sender() -> None:
    layer = RedisChannelLayer(hosts=[REDIS_URL], prefix=f"advisors-tests-{uuid.uuid4().hex}")
    try:
        sender, watcher = await layer.new_channel(), await layer.new_channel()
        for channel in (sender, watcher):
            await layer.group_add("g", channel)
        await layer.group_send("g", {"type": "turn.events", "origin": sender, "n": 1})
        await layer.group_send("g", {"type": "turn.events", "origin": "", "n": 2})
        assert [(await layer.receive(watcher))["n"] for _ in range(2)] == [1, 2]
        assert (await layer.receive(sender))["n"] == 2  # the first never reached it
    finally:
        await layer.flush()
        await layer.close_pools()


async def test_the_turn_buffer_shares_the_layers_pool_settings() -> None:
    with override_settings(CHANNEL_LAYERS=channel_layers(REDIS_URL)):
        layer = get_channel_layer()
        assert isinstance(layer, RedisChannelLayer)
        buffer = tb.turn_buffer()
        assert isinstance(buffer, tb.RedisTurnBuffer)
        client = buffer._client()
        pool = client.connection_pool
        assert isinstance(pool, BlockingConnectionPool)
        assert (pool.max_connections, pool.timeout) == (200, 20.0)
        await client.aclose()


async def test_a_turn_with_no_other_socket_listening_skips_the_group_send() -> None:
    """On channels_redis the buffer write reads the user's group in the same round trip; the
    group_send (three more) goes only when a socket besides the sender is in it."""
    config = channel_layers(REDIS_URL)
    config["default"]["CONFIG"]["prefix"] = f"advisors-tests-{uuid.uuid4().hex}"
    with override_settings(CHANNEL_LAYERS=config):
        layer = get_channel_layer()
        sent: list[str] = []
        group_send = layer.group_send

        async def counted(group: str, message: dict[str, Any]) -> None:
            sent.append(group)
            await group_send(group, message)

        layer.group_send = counted
        user = type("User", (), {"pk": 7})()
        sender, watcher = await layer.new_channel(), await layer.new_channel()
        await layer.group_add(tb.user_group(user), sender)
        try:
            alone = tb.TurnPublisher(user, "c1", "t1", sender)
            alone.stamp({"type": "start"})
            await alone.drain()
            assert sent == []  # only the sender listens: not sent
            assert [f["event_id"] for f in await tb.turn_buffer().read(7, "c1")] == ["t1-1"]

            await layer.group_add(tb.user_group(user), watcher)
            watched = tb.TurnPublisher(user, "c2", "t2", sender)
            watched.stamp({"type": "start"})
            await watched.drain()
            assert sent == [tb.user_group(user)]
            received = await asyncio.wait_for(layer.receive(watcher), 5)
            assert [f["event_id"] for f in received["frames"]] == ["t2-1"]
        finally:
            await layer.flush()
            await layer.close_pools()


async def test_on_the_in_memory_layer_too_a_lone_sender_gets_no_group_message() -> None:
    """Its own socket only received and dropped it, on the event loop that was producing the
    turn's first tokens."""
    with override_settings(CHANNEL_LAYERS=IN_MEMORY):
        layer = get_channel_layer()
        user = type("User", (), {"pk": 8})()
        sender, watcher = await layer.new_channel(), await layer.new_channel()
        await layer.group_add(tb.user_group(user), sender)
        alone = tb.TurnPublisher(user, "c1", "t1", sender)
        alone.stamp({"type": "start"})
        await alone.drain()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(layer.receive(sender), 0.2)
        await layer.group_add(tb.user_group(user), watcher)
        watched = tb.TurnPublisher(user, "c2", "t2", sender)
        watched.stamp({"type": "start"})
        await watched.drain()
        received = await asyncio.wait_for(layer.receive(watcher), 5)
        assert [f["event_id"] for f in received["frames"]] == ["t2-1"]
        await layer.flush()


class HeldBuffer(tb.InMemoryTurnBuffer):
    """Stores batches at once until ``holding`` is set, then only once ``gate`` is."""

    def __init__(self) -> None:
        super().__init__(300)
        self.holding = False
        self.gate = asyncio.Event()

    async def append(self, owner: int, conversation_id: str, frames: list[dict[str, Any]]) -> None:
        if self.holding:
            await self.gate.wait()
        await super().append(owner, conversation_id, frames)


@override_settings(ADVISORS=FAST)
async def test_a_resume_in_a_turn_the_buffer_does_not_hold_yet_never_replays_the_last_one(
    alice: Any, chain: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: the buffer still held the conversation's previous turn, and the client that
    had seen the new turn's first frames got the whole previous answer again."""
    buffer = HeldBuffer()
    monkeypatch.setattr(tb, "turn_buffer", lambda: buffer)
    monkeypatch.setattr(consumers, "turn_buffer", lambda: buffer)
    await script(chain.slug, WORDS, WORDS, delay=0.02)
    talking = await open_socket(alice)
    await talking.send_json_to({"type": "message", "text": "one"})
    first = await frames_until_end(talking)
    conversation = first[-1]["conversation_id"]
    while (kept := await buffer.read(alice.pk, conversation)) is None or kept[-1]["type"] != "done":
        await asyncio.sleep(0.02)
    buffer.holding = True  # the second turn's batches lag behind its frames
    await talking.send_json_to({"type": "message", "text": "two", "conversation_id": conversation})
    before = await until_id(talking, 4)
    resumed, after = await resume_while_held(alice, conversation, before, buffer, 0.3)
    own = before + await frames_until_end(talking)
    assert {f["event_id"].rpartition("-")[0] for f in after} == {
        before[0]["event_id"].rpartition("-")[0]
    }
    assert ids_of(after) == list(range(5, len(own) + 1))  # the new turn's rest, each once
    await talking.disconnect()
    await resumed.disconnect()


# What the SSE view and the websocket share (advisors_app.turn.delivery) ----------------------


async def test_a_cancelled_turn_ends_with_its_held_text_then_its_done() -> None:
    async def deltas() -> Any:
        yield DeltaEvent("a")
        yield DeltaEvent("b")
        await asyncio.sleep(3600)

    events = DeltaCoalescer(deltas(), interval=60)
    assert (await anext(events)).text == "a"  # the first piece at once, then "b" is held
    step = asyncio.ensure_future(anext(events))
    await asyncio.sleep(0.01)
    step.cancel()
    await asyncio.wait((step,))
    await events.aclose()
    frames = cancelled_frames(None, events, "support")
    assert frames[0] == {"type": "delta", "text": "b"}
    assert (frames[1]["type"], frames[1]["reason"], frames[1]["stored"]) == (
        "done",
        "cancelled",
        False,
    )
    # Cancelled before it was set up: nothing ran, nothing is stored, the chain is named.
    assert [f["type"] for f in cancelled_frames(None, None, "support")] == ["done"]


def test_a_resume_names_its_conversation_and_nothing_unknown() -> None:
    assert resume_errors({"conversation_id": "c1", "type": "resume"}, ("type",)) == {}
    assert resume_errors({"last_event_id": 5, "colour": "red"}, ("last_event_id",)) == {
        "conversation_id": ["Name the conversation to resume."],
        "last_event_id": ["Expected the id of an event (a string) or null."],
        "colour": ["Unknown field."],
    }
    refusal = nothing_to_resume("c1")
    assert (refusal.code, refusal.http_status, refusal.conversation_id) == ("not_found", 404, "c1")
