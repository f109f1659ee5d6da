"""The example site: home page, admin, ASGI routing and channel-layer selection."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from channels.layers import get_channel_layer
from django.test import Client, override_settings

from tests.helpers import subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def test_home_page_links_to_admin_chat_and_api_docs(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 200
    for href in ("/admin/", "/chat/", "/api/docs/"):
        assert f'href="{href}"' in response.content.decode()


@pytest.mark.django_db
def test_admin_login_page_is_served(client: Client) -> None:
    assert client.get("/admin/login/").status_code == 200


def test_asgi_application_routes_http_and_websockets() -> None:
    from advisorsite.asgi import application

    assert set(application.application_mapping) == {"http", "websocket"}


@pytest.mark.parametrize(
    ("redis_url", "backend"),
    [
        ("redis://127.0.0.1:6379/0", "advisors_app.channels.redis_layer.RedisChannelLayer"),
        ("", "channels.layers.InMemoryChannelLayer"),
    ],
)
def test_channel_layer_follows_redis_url(redis_url: str, backend: str) -> None:
    script = (
        "import json; from django.conf import settings; "
        "print(json.dumps(settings.CHANNEL_LAYERS['default']))"
    )
    env = subprocess_env(
        DJANGO_SETTINGS_MODULE="advisorsite.settings",
        DATABASE_URL="postgresql://unused@localhost/unused",  # settings only; nothing connects
        REDIS_URL=redis_url,
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["BACKEND"] == backend


async def test_redis_channel_layer_round_trip() -> None:
    """Needs Redis on 127.0.0.1:6379, which scripts/test.sh makes sure of."""
    redis_layer = {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": ["redis://127.0.0.1:6379/0"], "prefix": "advisors-tests"},
    }
    with override_settings(CHANNEL_LAYERS={"default": redis_layer}):
        layer = get_channel_layer()
        try:
            channel = await layer.new_channel()
            await layer.send(channel, {"type": "chat.delta", "text": "héllo"})
            assert await layer.receive(channel) == {"type": "chat.delta", "text": "héllo"}
        finally:
            await layer.flush()
            await layer.close_pools()


@pytest.mark.slow
async def test_redis_layer_receive_outlasts_a_busy_event_loop() -> None:
    """A receive survives an event loop that was blocked past the end of its 5 s wait.

    channels_redis waits for a message with ``BZPOPMIN`` for ``brpop_timeout`` (5 s). On a
    loaded server the loop reads the empty reply late; with redis-py's default 5 s read
    timeout that counted as a timeout, ``receive`` raised and the consumer died (2 of 500
    chats lost in ``benchmarks/websocket_load.py``). Needs Redis on 127.0.0.1:6379.
    """
    from advisorsite.settings import channel_layers

    config = channel_layers("redis://127.0.0.1:6379/0")["default"]
    config["CONFIG"]["prefix"] = f"advisors-tests-{uuid.uuid4().hex}"
    with override_settings(CHANNEL_LAYERS={"default": config}):
        layer = get_channel_layer()
        try:
            channel = await layer.new_channel()
            receive = asyncio.ensure_future(layer.receive(channel))
            await asyncio.sleep(0.5)  # the BZPOPMIN is on its way
            time.sleep(layer.brpop_timeout + 1)  # the loop is busy past the wait's end
            await asyncio.sleep(0.5)
            assert not receive.done(), receive.exception()
            await layer.send(channel, {"type": "chat.delta", "text": "still here"})
            assert await asyncio.wait_for(receive, 10) == {
                "type": "chat.delta",
                "text": "still here",
            }
        finally:
            await layer.flush()
            await layer.close_pools()
