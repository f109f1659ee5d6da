"""Real MCP servers for the tests: the SDK's ``MCPServer`` over stdio (started by the client
pool from ``ADVISORS["MCP_SERVERS"]``) and over streamable HTTP (a uvicorn subprocess on a
loopback port, guarded by a bearer token read from ``MCP_TEST_TOKEN``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import subprocess_env

SERVER = str(Path(__file__).with_name("server.py"))
TOKEN = "test-token-7f3a"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    """Return once ``process`` accepts connections on ``port`` (20 s at most)."""
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise RuntimeError("the MCP test server did not start") from None
            time.sleep(0.1)


@pytest.fixture(scope="session")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """``{"url", "marker"}`` of a streamable-HTTP MCP server running for the session."""
    port = _free_port()
    marker = tmp_path_factory.mktemp("mcp") / "http-cancel.txt"
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port), str(marker)],
        env=subprocess_env(MCP_TEST_TOKEN=TOKEN),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port, process)
    yield {"url": f"http://127.0.0.1:{port}/mcp", "marker": marker}
    process.terminate()
    try:
        process.wait(timeout=3)
    except subprocess.TimeoutExpired:
        # Open streams (a pooled client's listen stream) keep uvicorn's graceful exit waiting.
        process.kill()
        process.wait(timeout=5)


@pytest.fixture(scope="session", autouse=True)
def _close_pool() -> Iterator[None]:
    yield
    from advisors_app.mcp import close_mcp_connections

    close_mcp_connections()


def stdio_entry(marker: Path | None = None, **extra: Any) -> dict[str, Any]:
    args = [SERVER, "stdio"] + ([str(marker)] if marker else [])
    return {"command": sys.executable, "args": args, **extra}


@pytest.fixture(scope="session")
def cancel_marker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The file the stdio servers note cancelled calls in; one per session, so the servers
    (keyed by their configuration) are started once, not per test."""
    return tmp_path_factory.mktemp("mcp-stdio") / "stdio-cancel.txt"


@pytest.fixture
def mcp_settings(
    settings: Any, tmp_path: Path, cancel_marker: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """stdio servers ``local`` (5 s calls), ``quick`` (0.5 s calls), ``patient`` (30 s calls)
    and ``growing`` (its own process, per test) in the settings; the token variable set.
    Returns the cancel marker."""
    marker = cancel_marker
    marker.write_text("")
    monkeypatch.setenv("MCP_TEST_TOKEN", TOKEN)
    settings.ADVISORS = {
        **settings.ADVISORS,
        "MCP_SERVERS": {
            "local": stdio_entry(call_timeout=5),
            "quick": stdio_entry(marker, call_timeout=0.5),
            "patient": stdio_entry(marker, call_timeout=30),
            # A different cwd per test gives a different configuration: a new process.
            "growing": stdio_entry(cwd=str(tmp_path)),
        },
    }
    return marker
