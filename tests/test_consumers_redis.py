"""Two daphne processes, one Redis channel layer, one database: a conversation moves servers."""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from websockets.asyncio.client import ClientConnection, connect

from advisors_app.models import CallLog, ChatMessage
from tests.factories import make_chain, scripted_model
from tests.helpers import database_url_for_subprocess
from tests.live_server import ROOT, LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: The machine's Redis (scripts/test.sh starts it), in a database of its own.
REDIS_URL = os.environ.get("ADVISORS_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2).ping())
    except redis.RedisError:
        return False


@pytest.fixture
def servers(django_db_setup: Any) -> Iterator[tuple[LiveServer, LiveServer]]:
    if not redis_answers(REDIS_URL):
        pytest.skip(f"no Redis at {REDIS_URL} (scripts/test.sh starts one)")
    env = {
        "DATABASE_URL": database_url_for_subprocess(),
        "REDIS_URL": REDIS_URL,
        # Concurrent runs on this machine share the Redis server, never the keys.
        "ADVISORS_TEST_REDIS_PREFIX": f"advisors-test-{uuid.uuid4().hex}",
    }
    logs = ROOT / "test-artifacts" / "redis"
    first = LiveServer(logs / "server-1.log", **env)
    second = LiveServer(logs / "server-2.log", **env)
    with first, second:
        yield first, second
    for server in (first, second):
        assert "took too long to shut down" not in server.log()


async def socket(server: LiveServer, slug: str, cookie: str) -> ClientConnection:
    return await connect(
        f"{server.ws_url}/ws/chat/{slug}/",
        origin=server.url,  # type: ignore[arg-type]
        additional_headers={"Cookie": cookie},
        proxy=None,
    )


async def turn(ws: ClientConnection, **frame: Any) -> list[dict[str, Any]]:
    await ws.send(json.dumps({"type": "message", **frame}))
    frames = []
    while True:
        received = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if received["type"] != "conversation":
            frames.append(received)
        if received["type"] in ("done", "error"):
            return frames


async def next_of_type(ws: ClientConnection, kind: str) -> dict[str, Any]:
    while True:
        received = json.loads(await asyncio.wait_for(ws.recv(), 10))
        if received["type"] == kind:
            return received


def test_a_conversation_started_on_one_server_continues_on_the_other(
    servers: tuple[LiveServer, LiveServer], django_user_model: Any
) -> None:
    first, second = servers
    alice = django_user_model.objects.create_user("alice", password="pw")
    chain = make_chain(
        "remembers",
        model=scripted_model(
            "two-servers", responses=[["Oslo ", "is ", "the ", "capital."], ["About ", "700,000."]]
        ),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )
    client = Client()
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    async def scenario() -> tuple[list[dict], list[dict], dict]:
        on_first = await socket(first, chain.slug, cookie)
        on_second = await socket(second, chain.slug, cookie)
        started = await turn(on_first, text="Tell me about Oslo")
        # The second server's socket heard of the new conversation: only the Redis layer
        # carries that from one process to another.
        notice = await next_of_type(on_second, "conversation")
        continued = await turn(
            on_second, text="Its population?", conversation_id=started[0]["conversation_id"]
        )
        await on_first.close()
        await on_second.close()
        return started, continued, notice

    started, continued, notice = asyncio.run(scenario())
    conversation = started[0]["conversation_id"]
    assert started[-1]["content"] == "Oslo is the capital."
    assert notice == {
        "type": "conversation",
        "conversation_id": conversation,
        "title": "Tell me about Oslo",
        "removed": False,
    }
    assert continued[0]["conversation_id"] == conversation
    assert continued[-1]["type"] == "done"
    # The second server's model got the first server's turn from the shared memory.
    log = CallLog.objects.get(trace_id=continued[-1]["trace_id"])
    [model_entry] = [e for e in log.trace["entries"] if e["name"] == "stream"]
    assert [m["text"] for m in model_entry["request"]["prompt"]["messages"]] == [
        "Tell me about Oslo",
        "Oslo is the capital.",
        "Its population?",
    ]
    stored = ChatMessage.objects.filter(conversation__conversation_id=f"{alice.pk}:{conversation}")
    assert [m.text for m in stored.order_by("sequence")] == [
        "Tell me about Oslo",
        "Oslo is the capital.",
        "Its population?",
        "Oslo is the capital.",  # each process's scripted model starts its script afresh
    ]


def test_a_frame_over_the_limit_is_answered_then_closed_4009_by_daphne(
    servers: tuple[LiveServer, LiveServer], django_user_model: Any
) -> None:
    """Through real daphne (autobahn refuses 1009 from an application: the close must work)."""
    from websockets.exceptions import ConnectionClosed

    from advisors_app.channels.consumers import MAX_FRAME_BYTES

    first, _ = servers
    alice = django_user_model.objects.create_user("alice", password="pw")
    chain = make_chain("big-frames")
    client = Client()
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    async def scenario() -> tuple[dict[str, Any], int | None]:
        ws = await socket(first, chain.slug, cookie)
        await ws.send(json.dumps({"type": "message", "text": "x" * (MAX_FRAME_BYTES + 10)}))
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        try:
            await asyncio.wait_for(ws.recv(), 10)
        except ConnectionClosed as closed:
            return frame, closed.rcvd.code if closed.rcvd else None
        raise AssertionError("the socket stayed open")

    frame, code = asyncio.run(scenario())
    assert (frame["type"], frame["code"]) == ("error", "invalid")
    assert code == 4009
    assert "invalid close code" not in first.log()
