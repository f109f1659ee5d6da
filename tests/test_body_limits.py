"""Request bodies over their route's limit are refused before they are read
(advisors_app.security.body_limits, issue 36 item 4).

The reproduction: four anonymous 200 MB POSTs to ``/mcp/`` grew a daphne process by the bodies'
size before the 401. Here the same bodies, to the MCP endpoint, an API route and the upload
route, by ``Content-Length`` and chunked, get 413 from a real server on loopback (daphne, as the
site ships; uvicorn, which runs the ASGI middleware itself), and the server's peak resident
memory (``VmHWM`` in ``/proc``, reset before the bodies) stays far below one body.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.test import override_settings
from rest_framework.authtoken.models import Token

from advisors_app.models import Collection
from advisors_app.security.body_limits import BodyLimitMiddleware, request_body_limit
from tests.helpers import database_url_for_subprocess, subprocess_env
from tests.live_server import ROOT, LiveServer

MiB = 1024 * 1024
GENERAL = MiB  # ADVISORS["MAX_REQUEST_BODY_BYTES"]'s default
UPLOAD = 10 * 10 * MiB + GENERAL  # ten files of MAX_UPLOAD_BYTES, plus the general limit
ATTACK = 200 * MiB  # the size of each body the tester sent

MCP = "/mcp/"
API = "/api/chains/anything/call/"
UPLOADS = "/api/documents/"
ADMIN_UPLOAD = "/admin/advisors_app/collection/1/upload/"


# -- the limit of each route ---------------------------------------------------------------------


def test_uploads_get_their_files_on_top_of_the_general_limit_and_the_rest_the_general_one() -> None:
    assert request_body_limit(MCP).most == request_body_limit(API).most == GENERAL
    assert request_body_limit("/admin/advisors_app/advisorchain/add/").most == GENERAL
    assert request_body_limit("/no/such/page/").most == GENERAL
    assert request_body_limit(UPLOADS).most == UPLOAD
    assert request_body_limit(ADMIN_UPLOAD).most == 10 * MiB + GENERAL
    # Under a root path, as daphne's --root-path puts it in the scope.
    assert request_body_limit("/site" + UPLOADS, "/site").most == UPLOAD
    assert "ADVISORS['MAX_REQUEST_BODY_BYTES'] = 1048576" in request_body_limit(API).message()


@override_settings(
    ADVISORS={"MAX_REQUEST_BODY_BYTES": 1000, "MAX_UPLOAD_BYTES": 300, "UPLOAD_MAX_FILES": 2}
)
def test_the_limits_follow_the_settings() -> None:
    assert request_body_limit(API).most == 1000
    assert request_body_limit(UPLOADS).most == 2 * 300 + 1000
    with override_settings(ADVISORS={"MAX_UPLOAD_BYTES": 300, "UPLOAD_BYTES_PER_DAY": 500}):
        # No upload may pass a day's quota: 413 in the view anyway.
        assert request_body_limit(UPLOADS).most == 500 + GENERAL
    with override_settings(ADVISORS={"MAX_REQUEST_BODY_BYTES": 0}):
        assert request_body_limit(API) is None
        assert request_body_limit(UPLOADS) is None


# -- the ASGI middleware, in process ------------------------------------------------------------


class Reader:
    """An ASGI application that reads the whole body, then answers 200 with its length."""

    def __init__(self) -> None:
        self.calls = 0
        self.messages: list[str] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.calls += 1
        size, more = 0, True
        while more:
            message = await receive()
            self.messages.append(message["type"])
            if message["type"] == "http.disconnect":
                break
            size += len(message["body"])
            more = message.get("more_body", False)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(size).encode()})


async def call(
    app: Any, path: str, pieces: list[bytes], content_length: int | None
) -> list[dict[str, Any]]:
    """What ``app`` sends for a POST to ``path`` whose body arrives in ``pieces``."""
    headers = [] if content_length is None else [(b"content-length", b"%d" % content_length)]
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers}
    incoming = [
        {"type": "http.request", "body": piece, "more_body": i < len(pieces) - 1}
        for i, piece in enumerate(pieces)
    ]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    return sent


def refused(sent: list[dict[str, Any]]) -> dict[str, Any]:
    start, body = sent
    assert start["status"] == 413
    error = json.loads(body["body"])["error"]
    assert error["code"] == "too_large"
    return error


async def test_a_declared_length_over_the_limit_is_refused_before_the_application_runs() -> None:
    reader = Reader()
    sent = await call(BodyLimitMiddleware(reader), API, [b"x"], GENERAL + 1)
    assert refused(sent)["message"] == (
        "The request body is larger than 1048576 bytes "
        "(ADVISORS['MAX_REQUEST_BODY_BYTES'] = 1048576)."
    )
    assert reader.calls == 0


async def test_a_body_of_unknown_length_is_cut_at_the_limit() -> None:
    reader = Reader()
    pieces = [b"x" * (256 * 1024)] * 8  # 2 MiB, no Content-Length
    sent = await call(BodyLimitMiddleware(reader), API, pieces, None)
    refused(sent)  # the application's own answer is dropped
    # It read up to the limit, then heard the client leave; the rest was never received.
    assert reader.messages == ["http.request"] * 4 + ["http.disconnect"]


async def test_bodies_within_the_limit_pass_and_uploads_get_theirs() -> None:
    reader = Reader()
    app = BodyLimitMiddleware(reader)
    assert (await call(app, API, [b"x" * GENERAL], GENERAL))[1]["body"] == b"1048576"
    assert (await call(app, API, [b"x" * 100] * 3, None))[1]["body"] == b"300"
    upload = [b"x" * MiB] * 5
    assert (await call(app, UPLOADS, upload, None))[1]["body"] == b"5242880"
    assert (await call(app, UPLOADS, [b"x"], 5 * MiB))[1]["body"] == b"1"
    assert refused(await call(app, UPLOADS, [b"x"], UPLOAD + 1))["message"].startswith(
        f"The request body is larger than {UPLOAD} bytes (an upload: "
    )


async def test_other_scopes_pass_untouched() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    await BodyLimitMiddleware(app)({"type": "websocket", "path": MCP, "headers": []}, None, None)
    assert seen == ["websocket"]


# -- real servers on loopback --------------------------------------------------------------------


def post(port: int, path: str, size: int, *, chunked: bool, send_body: bool = True) -> Any:
    """POST ``size`` bytes to ``path`` as an anonymous client, by ``Content-Length`` or chunked;
    stop sending when the server answers or closes. Returns (status, JSON body, bytes sent)."""
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {size}"
    # Sending only the headers, the client asks to be told to go ahead (as curl does).
    expect = "" if send_body else "Expect: 100-continue\r\n"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{expect}{framing}\r\n\r\n"
    )
    piece = b"x" * MiB
    sent = 0
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head.encode())
        try:
            while send_body and sent < size and not select.select([sock], [], [], 0)[0]:
                sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
                sent += len(piece)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server closed the connection: its answer is already on its way
        reader = sock.makefile("rb")
        status = int(reader.readline().split()[1])
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        # By its length: a server that drains the rest of the body keeps the connection open.
        body = json.loads(reader.read(length))
    return status, body, sent


def peak_rss_reset(pid: int) -> None:
    """Start ``VmHWM`` (the peak resident memory) of process ``pid`` over from now."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def attack(port: int, pid: int, cases: dict[tuple[str, bool], int]) -> int:
    """Four anonymous ``ATTACK``-byte bodies at once for each (path, chunked) case, each
    answered with the case's status; what the server's peak memory grew by."""
    for path, chunked in cases:  # once first: what the first request loads is not the bodies
        post(port, path, 2 * UPLOAD, chunked=chunked)
    peak_rss_reset(pid)
    before = peak_rss(pid)
    answers: list[Any] = []

    def one(path: str, chunked: bool) -> None:
        answers.append((path, chunked, *post(port, path, ATTACK, chunked=chunked)))

    threads = [threading.Thread(target=one, args=case) for case in cases for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == len(threads)
    for path, chunked, status, body, sent in answers:
        limit = UPLOAD if path == UPLOADS else GENERAL
        assert (path, chunked, status) == (path, chunked, cases[path, chunked]), body
        if status == 413:
            assert body["error"]["code"] == "too_large"
        assert sent < limit + 16 * MiB  # the rest was never sent
    return peak_rss(pid) - before


@pytest.fixture(scope="module")
def daphne(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The example site under daphne, on the test database."""
    log = tmp_path_factory.mktemp("body-limits") / "daphne.log"
    with LiveServer(log, DATABASE_URL=database_url_for_subprocess()) as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("path", [MCP, API, UPLOADS])
def test_daphne_refuses_a_declared_length_before_reading_the_body(
    daphne: LiveServer, path: str
) -> None:
    limit = UPLOAD if path == UPLOADS else GENERAL
    # Only the headers are sent; "Expect: 100-continue" gets the 413, not a go-ahead.
    status, body, sent = post(daphne.port, path, limit + 1, chunked=False, send_body=False)
    assert (status, sent) == (413, 0)
    assert body["error"]["code"] == "too_large"
    assert f"larger than {limit} bytes" in body["error"]["message"]


@pytest.mark.slow
def test_daphne_holds_no_anonymous_body_in_memory(daphne: LiveServer) -> None:
    assert daphne.process is not None
    cases = dict.fromkeys([(MCP, False), (MCP, True), (API, False), (API, True)], 413)
    cases[UPLOADS, False] = 413
    grown = attack(daphne.port, daphne.process.pid, cases)
    assert grown < 32 * MiB, f"{grown / MiB:.0f} MiB for {4 * len(cases)} bodies of 200 MiB"
    # The upload route reads up to its limit (to a temporary file), then refuses.
    status, body, sent = post(daphne.port, UPLOADS, ATTACK, chunked=True)
    assert (status, body["error"]["code"]) == (413, "too_large")
    assert UPLOAD <= sent < UPLOAD + 16 * MiB


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_an_upload_within_its_limit_still_works(daphne: LiveServer, django_user_model: Any) -> None:
    Collection.objects.create(slug="kb", name="KB")
    user = django_user_model.objects.create_user("alice", password="pw")
    token = Token.objects.create(user=user).key
    text = b"Refunds take five days.\n" * (3 * MiB // 24)  # over the general limit
    response = httpx.post(
        f"{daphne.url}{UPLOADS}",
        headers={"Authorization": f"Token {token}"},
        data={"collection": "kb"},
        files={"file": ("refunds.txt", text, "text/plain")},
        timeout=60,
    )
    assert response.status_code == 202, response.text
    assert response.json()["sources"] == ["refunds.txt"]


@pytest.fixture(scope="module")
def uvicorn(django_db_setup: Any) -> Iterator[tuple[int, int]]:
    """The example site under uvicorn, which hands bodies over as the application reads them:
    the ASGI middleware alone refuses them. Yields (port, pid)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = subprocess_env(
        DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=database_url_for_subprocess()
    )
    command = [sys.executable, "-m", "uvicorn", "advisorsite.asgi:application"]
    options = ["--host", "127.0.0.1", "--port", str(port), "--lifespan", "off"]
    process = subprocess.Popen([*command, *options, "--log-level", "warning"], cwd=ROOT, env=env)
    try:
        while process.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except ConnectionRefusedError:
                select.select([], [], [], 0.1)
        assert process.poll() is None, "uvicorn did not start"
        yield port, process.pid
    finally:
        process.terminate()
        process.wait(30)


@pytest.mark.slow
def test_uvicorn_holds_no_anonymous_body_in_memory(uvicorn: tuple[int, int]) -> None:
    port, pid = uvicorn
    status, body, sent = post(port, MCP, GENERAL + 1, chunked=False, send_body=False)
    assert (status, sent, body["error"]["code"]) == (413, 0, "too_large")
    cases = dict.fromkeys([(MCP, False), (API, False), (API, True), (UPLOADS, False)], 413)
    # uvicorn hands a chunked body over as it is read, and the MCP endpoint reads none from an
    # anonymous client: its 401 comes first, and the body stays unread.
    cases[MCP, True] = 401
    grown = attack(port, pid, cases)
    assert grown < 32 * MiB, f"{grown / MiB:.0f} MiB for {4 * len(cases)} bodies of 200 MiB"
