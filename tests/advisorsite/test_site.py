"""The example site: home page, admin, ASGI routing and channel-layer selection."""

from __future__ import annotations

import json
import subprocess
import sys
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
        ("redis://127.0.0.1:6379/0", "channels_redis.core.RedisChannelLayer"),
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
