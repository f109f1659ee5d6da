"""The example site with ``DJANGO_DEBUG=0``: deploy checks clean, HTTPS only, WhiteNoise statics.

Each test runs the site's own settings (``advisorsite.settings``, not the suite's) in a
subprocess, as a deployment would.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from django.core.management.utils import get_random_secret_key
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from tests.helpers import database_url_for_subprocess, subprocess_env
from tests.live_server import ROOT, LiveServer

KEY = get_random_secret_key()
PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "advisorsite.settings",
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": KEY,
    "DATABASE_URL": "postgresql://unused@localhost/unused",  # settings and checks only
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=subprocess_env(**{**PRODUCTION, **env}),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_debug_off() -> None:
    checked = manage("check", "--deploy", "--fail-level", "WARNING")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # Silenced: the two HSTS scopes that bind the whole domain (README "Deployment"), and
    # Django's look-ups of its middleware by name, which advisorsite.W001–W003 replace.
    assert "System check identified no issues" in checked.stdout
    opted_in = manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS="1",
        DJANGO_SECURE_HSTS_PRELOAD="1",
    )
    assert opted_in.returncode == 0, opted_in.stdout + opted_in.stderr
    assert "System check identified no issues" in opted_in.stdout


def test_debug_off_requires_the_secret_key_from_the_environment() -> None:
    refused = manage("check", DJANGO_SECRET_KEY="")
    assert refused.returncode != 0
    assert "ImproperlyConfigured: DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off" in (
        refused.stderr
    )


@pytest.mark.parametrize("debug", ["", "1", "true"])
def test_the_demo_stays_in_debug_by_default(debug: str) -> None:
    script = "from django.conf import settings as s; print(s.DEBUG, s.SESSION_COOKIE_SECURE)"
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {script}"],
        cwd=ROOT,
        env=subprocess_env(
            DJANGO_SETTINGS_MODULE="advisorsite.settings",
            DJANGO_DEBUG=debug,
            DATABASE_URL=PRODUCTION["DATABASE_URL"],
        ),
        capture_output=True,
        text=True,
    )
    assert out.stdout.split() == ["True", "False"], out.stderr


def static_url(page: str, name: str) -> str:
    found = re.search(rf'"(/static/{re.escape(name)}\.[0-9a-f]{{12}}\.css)"', page)
    assert found, page
    return found.group(1)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_production_server_is_https_only_and_serves_static_files_with_whitenoise(
    tmp_path: Path,
) -> None:
    env = {
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        # As behind a TLS-terminating proxy that sets X-Forwarded-Proto.
        "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
    }
    collected = manage("collectstatic", "--noinput", **env)
    assert collected.returncode == 0, collected.stderr
    database = {"DATABASE_URL": database_url_for_subprocess()}
    checked = manage(
        "check", "--deploy", "--database", "default", "--fail-level", "WARNING", **database
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with LiveServer(
        ROOT / "test-artifacts" / "production" / "server.log",
        **{**PRODUCTION, **env, **database},
    ) as server:
        https = {"X-Forwarded-Proto": "https"}
        with httpx.Client(base_url=server.url, headers=https, timeout=30) as client:
            plain = httpx.get(f"{server.url}/accounts/login/", timeout=30)
            assert plain.status_code == 301
            assert plain.headers["location"].startswith("https://127.0.0.1:")

            login = client.get("/accounts/login/")
            assert login.status_code == 200
            assert login.headers["strict-transport-security"] == "max-age=3600"
            assert "; secure" in login.headers["set-cookie"].lower()  # the CSRF cookie

            # The page links the hashed copy collectstatic made; WhiteNoise serves it
            # compressed, cached "forever"; an unhashed name is cached briefly.
            hashed = client.get(static_url(login.text, "advisors_app/advisors"))
            assert hashed.status_code == 200
            assert hashed.headers["content-type"].startswith("text/css")
            assert hashed.headers["content-encoding"] == "gzip"
            assert "immutable" in hashed.headers["cache-control"]
            assert "border" in hashed.text
            unhashed = client.get("/static/advisors_app/chat.js")
            assert unhashed.status_code == 200
            assert unhashed.headers["cache-control"] == "max-age=60, public"
            assert client.head("/static/advisors_app/chat.js").content == b""
            assert client.get("/static/advisors_app/missing.js").status_code == 404

        async def handshake(origin: str) -> int:
            try:
                async with connect(
                    f"{server.ws_url}/ws/chat/any/",
                    origin=origin,  # type: ignore[arg-type]
                    additional_headers=https,
                    proxy=None,
                ):
                    return 101
            except InvalidStatus as refused:
                return refused.response.status_code

        # The page is https://127.0.0.1:<port> as far as the proxy told the server.
        assert asyncio.run(handshake(server.url.replace("http:", "https:"))) == 101
        assert asyncio.run(handshake(server.url)) == 403
    assert "synchronous iterators" not in server.log()


def test_the_site_checks_its_middleware_subclasses_in_place_of_djangos() -> None:
    from django.test import override_settings

    from advisorsite.middleware import check_middleware

    assert check_middleware() == []
    with override_settings(
        MIDDLEWARE=[
            "django.middleware.security.SecurityMiddleware",
            "django.middleware.clickjacking.XFrameOptionsMiddleware",
        ]
    ):
        assert [m.id for m in check_middleware()] == ["advisorsite.W003"]
