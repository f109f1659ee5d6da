"""The websocket Origin check (advisors_app.security.origins): scheme, host and port, as Django's
CSRF."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from django.http import HttpRequest, HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.test import RequestFactory, override_settings
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from advisors_app.security.origins import CsrfOriginValidator, origin_allowed
from tests.helpers import database_url_for_subprocess
from tests.live_server import ROOT, LiveServer

TOKEN = "abcdefghijklmnopqrstuvwxyzABCDEF"  # an unmasked CSRF secret (32 characters)


def failure_reason(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW`` of these tests: the reason as the body."""
    return HttpResponse(reason, status=403)


def scope(host: str | None, origin: str | None, *extra: tuple[str, str], **keys: Any) -> dict:
    headers = [("host", host), ("origin", origin), *extra]
    return {
        "type": "websocket",
        "path": "/ws/chat/x/",
        "headers": [(k.encode(), v.encode()) for k, v in headers if v is not None],
        **keys,
    }


@override_settings(CSRF_FAILURE_VIEW="tests.test_origins.failure_reason")
def csrf_accepts(host: str, origin: str, *, secure: bool = False, **meta: str) -> bool:
    """Whether ``CsrfViewMiddleware`` lets a POST with a valid token and this Origin through."""
    request = RequestFactory().post(
        "/", HTTP_HOST=host, HTTP_ORIGIN=origin, secure=secure, HTTP_X_CSRFTOKEN=TOKEN, **meta
    )
    request.COOKIES["csrftoken"] = TOKEN
    response = CsrfViewMiddleware(lambda r: HttpResponse())
    refused = response.process_view(request, lambda r: HttpResponse(), (), {})
    assert refused is None or b"Origin checking failed" in refused.content, refused.content
    return refused is None


# (Host header, Origin, the websocket is secure): on the site's default ALLOWED_HOSTS.
CASES = [
    ("127.0.0.1:8000", "http://127.0.0.1:8000", False),
    ("127.0.0.1:8000", "http://127.0.0.1:9999", False),  # the tester's: another port
    ("127.0.0.1:8000", "http://127.0.0.1", False),
    ("127.0.0.1:8000", "https://127.0.0.1:8000", False),  # another scheme
    ("127.0.0.1:8000", "http://localhost:8000", False),  # another host, though allowed
    ("localhost:8000", "http://localhost:8000", False),
    ("localhost", "http://localhost", False),
    ("localhost", "https://localhost", True),
    ("localhost", "http://localhost", True),  # an http page of an https site
    ("[::1]:8000", "http://[::1]:8000", False),
    ("[::1]:8000", "http://[::1]:8001", False),
    ("evil.example", "http://evil.example", False),  # not in ALLOWED_HOSTS
    ("127.0.0.1:8000", "null", False),
]


@pytest.mark.parametrize(("host", "origin", "secure"), CASES)
def test_the_verdict_is_django_csrfs(host: str, origin: str, secure: bool) -> None:
    websocket = scope(host, origin, scheme="wss" if secure else "ws")
    assert origin_allowed(websocket) == csrf_accepts(host, origin, secure=secure)


def test_only_the_sites_own_scheme_host_and_port_pass() -> None:
    accepted = [
        (h, o, s) for h, o, s in CASES if origin_allowed(scope(h, o, scheme="ws" + s * "s"))
    ]
    assert accepted == [
        ("127.0.0.1:8000", "http://127.0.0.1:8000", False),
        ("localhost:8000", "http://localhost:8000", False),
        ("localhost", "http://localhost", False),
        ("localhost", "https://localhost", True),
        ("[::1]:8000", "http://[::1]:8000", False),
    ]


@pytest.mark.parametrize(
    "websocket",
    [
        scope("127.0.0.1:8000", None),  # no Origin
        scope(None, "http://127.0.0.1:8000"),  # no Host and no server address
        scope("127.0.0.1:8000", "http://user@127.0.0.1:8000"),
        scope("127.0.0.1:8000", "http://127.0.0.1:8000/page"),
        scope("127.0.0.1:8000", "ftp://127.0.0.1:8000"),
        scope("127.0.0.1:8000", "http://[bad"),
    ],
)
def test_missing_or_malformed_origins_are_refused(websocket: dict) -> None:
    assert not origin_allowed(websocket)


def test_a_default_port_written_out_is_the_same_origin() -> None:
    # Browsers never write it; Django compares the text and would refuse it, harmlessly.
    assert origin_allowed(scope("localhost", "http://localhost:80"))
    assert origin_allowed(scope("localhost:443", "https://localhost", scheme="wss"))
    assert not origin_allowed(scope("localhost", "https://localhost:80", scheme="wss"))


def test_without_a_host_header_the_server_address_is_the_host() -> None:
    assert origin_allowed(scope(None, "http://127.0.0.1:8000", server=("127.0.0.1", 8000)))
    assert not origin_allowed(scope(None, "http://127.0.0.1:9999", server=("127.0.0.1", 8000)))


TRUSTED = ["https://chat.example.com", "https://*.example.org", "http://*.example.net:8080"]


@override_settings(CSRF_TRUSTED_ORIGINS=TRUSTED)
@pytest.mark.parametrize(
    ("origin", "trusted"),
    [
        ("https://chat.example.com", True),
        ("https://chat.example.com:8443", False),
        ("http://chat.example.com", False),
        ("https://www.example.org", True),
        ("https://a.b.example.org", True),
        ("https://example.org", True),  # Django's is_same_domain: the domain itself too
        ("https://www.example.org:8443", False),
        ("http://www.example.org", False),
        ("https://evilexample.org", False),
        ("http://a.example.net:8080", True),
        ("http://a.example.net", False),
    ],
)
def test_csrf_trusted_origins_admit_other_origins_exactly_as_for_a_post(
    origin: str, trusted: bool
) -> None:
    # The app's own address is something else: only the trusted list can let these in.
    assert origin_allowed(scope("127.0.0.1:8000", origin)) is trusted
    assert csrf_accepts("127.0.0.1:8000", origin) is trusted


@override_settings(SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"))
def test_behind_a_tls_proxy_the_forwarded_scheme_counts() -> None:
    forwarded = ("x-forwarded-proto", "https")
    assert origin_allowed(scope("localhost", "https://localhost", forwarded))
    assert not origin_allowed(scope("localhost", "http://localhost", forwarded))
    assert origin_allowed(scope("localhost", "http://localhost", ("x-forwarded-proto", "http")))
    meta = {"HTTP_X_FORWARDED_PROTO": "https"}
    assert csrf_accepts("localhost", "https://localhost", **meta)
    assert not csrf_accepts("localhost", "http://localhost", **meta)


@override_settings(USE_X_FORWARDED_HOST=True, ALLOWED_HOSTS=["chat.example.com"])
def test_with_use_x_forwarded_host_the_forwarded_host_counts() -> None:
    forwarded = ("x-forwarded-host", "chat.example.com")
    assert origin_allowed(scope("10.0.0.5:8000", "http://chat.example.com", forwarded))
    assert not origin_allowed(scope("10.0.0.5:8000", "http://10.0.0.5:8000", forwarded))


@override_settings(DEBUG=True, ALLOWED_HOSTS=[])
def test_debug_without_allowed_hosts_allows_djangos_local_hosts() -> None:
    assert origin_allowed(scope("app.localhost:8000", "http://app.localhost:8000"))
    assert not origin_allowed(scope("example.com", "http://example.com"))


async def accepted(application: Any, host: str, origin: str) -> bool:
    headers = [(b"host", host.encode()), (b"origin", origin.encode())]
    communicator = WebsocketCommunicator(application, "/ws/x/", headers=headers)
    connected, _ = await communicator.connect()
    await communicator.disconnect()
    return bool(connected)


async def test_the_validator_passes_allowed_handshakes_on_and_refuses_the_rest() -> None:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        await receive()
        await send({"type": "websocket.accept"})
        await receive()

    validator = CsrfOriginValidator(app)
    assert await accepted(validator, "127.0.0.1:8000", "http://127.0.0.1:8000")
    assert not await accepted(validator, "127.0.0.1:8000", "http://127.0.0.1:9999")
    with pytest.raises(ValueError, match="websocket"):
        await validator({"type": "http"}, None, None)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_live_server_refuses_a_page_on_another_port_with_403() -> None:
    """The tester's reproduction: a page on ``http://127.0.0.1:9999`` opening the chat socket."""
    with LiveServer(
        ROOT / "test-artifacts" / "origins" / "server.log",
        DATABASE_URL=database_url_for_subprocess(),
    ) as server:

        async def handshake(origin: str) -> int:
            try:
                async with connect(
                    f"{server.ws_url}/ws/chat/any/",
                    origin=origin,  # type: ignore[arg-type]
                    proxy=None,
                ) as ws:
                    # Anonymous: the consumer accepts, says not_authenticated and closes.
                    await asyncio.wait_for(ws.recv(), 10)
                    return 101
            except InvalidStatus as refused:
                return refused.response.status_code

        assert asyncio.run(handshake("http://127.0.0.1:9999")) == 403
        assert asyncio.run(handshake(server.url)) == 101
        assert "refused: its Origin 'http://127.0.0.1:9999'" in server.log()
