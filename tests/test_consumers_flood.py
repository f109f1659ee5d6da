"""A client flooding a chat socket is refused or cut off, not held in memory (issue 36 item 3).

The reproduction: four sockets sent ``resume`` frames with long conversation ids, each waited a
second inside ``receive`` while daphne queued the rest: 627 MB held while the sockets stayed
open. Here the same flood reaches a real daphne on loopback: long ids are refused at once
(``invalid``) and the server's resident memory grows by far less than the flood; a flood of
well-formed resumes, each waiting for its turn's buffer, closes the socket with 4429 past
``ADVISORS["WEBSOCKET_MAX_PENDING_FRAMES"]``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from advisors_app.channels.consumers import CLOSE_TOO_MANY_FRAMES
from advisors_app.conf import app_settings
from tests.factories import make_chain, scripted_model
from tests.helpers import database_url_for_subprocess
from tests.live_server import ROOT, LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MiB = 1024 * 1024
SOCKETS = 4
FRAMES = 60  # per socket, within its frame budget (WEBSOCKET_FRAME_BURST)
LONG_ID = "c" * 200_000  # under the consumer's frame limit (256 KiB): read, then refused


@pytest.fixture
def server(django_db_setup: Any) -> Iterator[LiveServer]:
    with LiveServer(
        ROOT / "test-artifacts" / "flood" / "server.log", DATABASE_URL=database_url_for_subprocess()
    ) as live:
        yield live


@pytest.fixture
def cookie(django_user_model: Any) -> str:
    make_chain("flooded", model=scripted_model("flooded", responses=("hi",)))
    client = Client()
    client.force_login(django_user_model.objects.create_user("mallory", password="pw"))
    return f"sessionid={client.cookies['sessionid'].value}"


def resident_bytes(server: LiveServer) -> int:
    assert server.process is not None
    for line in Path(f"/proc/{server.process.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


async def open_socket(server: LiveServer, cookie: str) -> ClientConnection:
    return await connect(
        f"{server.ws_url}/ws/chat/flooded/",
        origin=server.url,  # type: ignore[arg-type]
        additional_headers={"Cookie": cookie},
        proxy=None,
        max_size=None,
    )


def test_long_resume_ids_are_refused_and_the_flood_is_not_held(
    server: LiveServer, cookie: str
) -> None:
    frame = json.dumps({"type": "resume", "conversation_id": LONG_ID, "last_event_id": "a-1"})
    flood = SOCKETS * FRAMES * len(frame)

    async def scenario() -> tuple[list[list[dict[str, Any]]], int]:
        sockets = [await open_socket(server, cookie) for _ in range(SOCKETS)]
        before = resident_bytes(server)

        async def push(ws: ClientConnection) -> list[dict[str, Any]]:
            for _ in range(FRAMES):
                await ws.send(frame)
            return [json.loads(await asyncio.wait_for(ws.recv(), 60)) for _ in range(FRAMES)]

        answers = await asyncio.gather(*(push(ws) for ws in sockets))
        grown = resident_bytes(server) - before  # the sockets still open
        for ws in sockets:
            await ws.close()
        return answers, grown

    answers, grown = asyncio.run(scenario())
    for answer in (a for per_socket in answers for a in per_socket):
        assert (answer["type"], answer["code"]) == ("error", "invalid")
        assert "conversation_id" in answer["errors"]
    assert flood > 45 * MiB
    assert grown < flood / 4, f"the server grew {grown / MiB:.0f} MiB for {flood / MiB:.0f} MiB"


def test_resumes_past_the_bound_close_the_socket_with_4429(server: LiveServer, cookie: str) -> None:
    bound = app_settings.WEBSOCKET_MAX_PENDING_FRAMES
    # Each waits for a turn the buffer does not hold: they pile up, handled one at a time.
    frame = json.dumps({"type": "resume", "conversation_id": "c1", "last_event_id": "t-1"})

    async def scenario() -> tuple[list[dict[str, Any]], int | None]:
        ws = await open_socket(server, cookie)
        for _ in range(bound * 4):
            try:
                await ws.send(frame)
            except ConnectionClosed:
                break
        received = []
        try:
            while True:
                received.append(json.loads(await asyncio.wait_for(ws.recv(), 60)))
        except ConnectionClosed as closed:
            return received, closed.rcvd.code if closed.rcvd is not None else None

    received, code = asyncio.run(scenario())
    assert code == CLOSE_TOO_MANY_FRAMES
    assert received[-1]["type"] == "error" and received[-1]["code"] == "too_many_frames"
    assert all(r["code"] == "not_found" for r in received[:-1])
