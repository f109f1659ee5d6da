"""Stopping the server (Ctrl-C) mid-turn: every running turn is stored as interrupted and logged."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest
from django.test import Client
from rest_framework.authtoken.models import Token
from websockets.asyncio.client import connect

from advisors_app.models import CallLog, ChatMessage
from tests.factories import make_chain, scripted_model
from tests.helpers import database_url_for_subprocess, without_outcome
from tests.live_server import ROOT, LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def transcript(key: str) -> list[tuple[str, str, dict]]:
    rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
    return [(r.message_type, r.text, without_outcome(r.metadata)) for r in rows]


def test_ctrl_c_stores_the_turns_in_flight_over_websocket_and_sse(
    django_db_setup: Any, django_user_model: Any
) -> None:
    alice = django_user_model.objects.create_user("alice", password="pw")
    # 100 chunks, 0.1 s apart: ten seconds if nobody stops the model.
    model = scripted_model("slow-model", responses=[["x"] * 100], repeat=True)
    model.settings["chunk_delay"] = 0.1
    model.save()
    make_chain("slow", model=model)
    client = Client()
    client.force_login(alice)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    token = Token.objects.create(user=alice).key
    server = LiveServer(
        ROOT / "test-artifacts" / "shutdown" / "server.log",
        DATABASE_URL=database_url_for_subprocess(),
    )
    server.start()
    streaming = threading.Event()

    def sse_turn() -> None:
        with httpx.stream(
            "POST",
            f"{server.url}/api/chains/slow/stream/",
            json={"message": "over sse", "conversation_id": "sse"},
            headers={"Authorization": f"Token {token}"},
            timeout=30,
        ) as response:
            try:
                for line in response.iter_lines():
                    if line.startswith("event: delta"):
                        streaming.set()
            except httpx.HTTPError:
                pass  # the server went away: that is the point

    async def websocket_turn_then_stop() -> None:
        async with connect(
            f"{server.ws_url}/ws/chat/slow/",
            origin=server.url,  # type: ignore[arg-type]
            additional_headers={"Cookie": cookie},
            proxy=None,
        ) as ws:
            await ws.send(
                json.dumps({"type": "message", "text": "over ws", "conversation_id": "ws"})
            )
            while json.loads(await asyncio.wait_for(ws.recv(), 10))["type"] != "delta":
                pass
            await asyncio.to_thread(streaming.wait, 10)
            await asyncio.to_thread(server.stop)  # SIGINT, as Ctrl-C

    sse = threading.Thread(target=sse_turn)
    sse.start()
    try:
        asyncio.run(websocket_turn_then_stop())
    finally:
        server.stop()
        sse.join(30)
    assert not sse.is_alive()  # its stream ended with the server
    assert "took too long to shut down" not in server.log()
    for public, question in (("ws", "over ws"), ("sse", "over sse")):
        [(_, asked, _), (kind, partial, metadata)] = transcript(f"{alice.pk}:{public}")
        assert (asked, kind) == (question, "assistant")
        assert 1 <= len(partial) < 100 and set(partial) == {"x"}  # stopped, not run to the end
        log = CallLog.objects.get(conversation_id=f"{alice.pk}:{public}")
        assert log.status == "cancelled"
        assert metadata == {
            "interrupted": True,
            "finish_reason": "cancelled",
            "trace_id": log.trace_id,
        }
