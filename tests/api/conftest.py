"""Fixtures of the REST API tests: users with tokens, clients, fresh caches."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.cache import cache
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from advisors_app.runtime import clear_cache
from tests.helpers import database_url_for_subprocess, subprocess_env

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    """Built chains and throttle histories never leak between tests."""
    clear_cache()
    cache.clear()
    yield
    clear_cache()
    cache.clear()


def client_for(user: Any | None) -> APIClient:
    """An ``APIClient`` sending ``user``'s token (``None``: anonymous)."""
    client = APIClient()
    if user is not None:
        token, _ = Token.objects.get_or_create(user=user)
        client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def staff(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("staff", password="pw", is_staff=True)


@pytest.fixture
def api(alice: Any) -> APIClient:
    """Alice's client."""
    return client_for(alice)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def live_api(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of the example site under Daphne (a subprocess) on the test database.

    Rows a test writes must be committed to be seen: use ``django_db(transaction=True)``.
    """
    port = _free_port()
    log = tmp_path_factory.mktemp("daphne") / "server.log"
    env = subprocess_env(
        DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=database_url_for_subprocess()
    )
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    with log.open("wb") as output:
        server = subprocess.Popen(
            [*command, "advisorsite.asgi:application"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/api/schema/", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Daphne did not start:\n{log.read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
