"""Sockets per user are counted across server processes (issue 36, "Smaller"): two daphne
processes on one Redis; a user holding ``MAX_SOCKETS_PER_USER`` (20) sockets on the first is
refused a socket on the second (``too_many_sockets``, close 4429) until one on the first closes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from django.test import Client
from websockets.exceptions import ConnectionClosed

from advisors_app.channels.consumers import CLOSE_TOO_MANY_FRAMES
from advisors_app.conf import app_settings
from tests.live_server import LiveServer
from tests.test_consumers_redis import servers, socket  # noqa: F401 - the fixture

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_a_users_sockets_are_counted_across_processes(
    servers: tuple[LiveServer, LiveServer],  # noqa: F811
    django_user_model: Any,
) -> None:
    first, second = servers
    client = Client()
    client.force_login(django_user_model.objects.create_user("mallory", password="pw"))
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    limit = app_settings.MAX_SOCKETS_PER_USER

    async def refused_on(server: LiveServer) -> tuple[dict[str, Any], int | None]:
        ws = await socket(server, "any", cookie)
        frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
        return frame, ws.close_code

    async def served_on(server: LiveServer) -> Any:
        ws = await socket(server, "any", cookie)
        await ws.send(json.dumps({"type": "bogus"}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 10))["code"] == "invalid"
        return ws

    async def scenario() -> None:
        held = [await served_on(first) for _ in range(limit)]
        frame, code = await refused_on(second)
        assert (frame["type"], frame["code"], code) == (
            "error",
            "too_many_sockets",
            CLOSE_TOO_MANY_FRAMES,
        )
        await held.pop().close()
        # The first server gave the place back on close: the second one takes it now.
        for _ in range(50):
            try:
                held.append(await served_on(second))
                break
            except (AssertionError, ConnectionClosed):
                await asyncio.sleep(0.1)
        else:
            raise AssertionError("the freed place was never given back")
        assert (await refused_on(first))[0]["code"] == "too_many_sockets"
        for ws in held:
            await ws.close()

    asyncio.run(scenario())
