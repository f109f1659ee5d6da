"""A streamable-HTTP MCP server restarted under the pool: the pool follows the new process —
calls reach it and its list-changed notices drop the cached tools."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisors_app.mcp import ServerConfig
from advisors_app.mcp.pool import McpClientPool
from tests.helpers import subprocess_env
from tests.mcp.conftest import SERVER, TOKEN, _free_port, wait_for_port

pytestmark = pytest.mark.usefixtures("mcp_settings")


def start(port: int, marker: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", str(port), str(marker)],
        env=subprocess_env(MCP_TEST_TOKEN=TOKEN),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    wait_for_port(port, process)
    return process


def port_open(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
    except OSError:
        return False
    return True


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        process.kill()
        process.wait(timeout=5)


def test_after_a_restart_the_pool_listens_to_the_new_process(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    port = _free_port()
    processes.append(start(port, tmp_path / "m1"))
    config = ServerConfig(
        "restarting",
        "http",
        url=f"http://127.0.0.1:{port}/mcp",
        headers=(("Authorization", "Bearer ${MCP_TEST_TOKEN}"),),
        connect_timeout=5,
        call_timeout=5,
    )
    pool = McpClientPool()
    try:
        first = pool.list_tools_sync(config)
        assert [t.description for t in first if t.name == "shout"] == ["The text in capitals."]

        # A restart: the old process is told to stop (uvicorn waits for open requests: the
        # pool's listen stream, closed by the pool, is only noticed when it writes), a new one
        # takes the port.
        time.sleep(1.0)  # the listen stream is no longer fresh (LISTEN_RENEW_SECONDS)
        processes[0].terminate()
        deadline = time.monotonic() + 5
        while port_open(port):  # the old process stops listening first
            assert time.monotonic() < deadline, "the old process kept its port"
            time.sleep(0.05)
        processes.append(start(port, tmp_path / "m2"))

        changes = pool.changes.get("restarting", 0)
        result = asyncio.run(pool.call_tool(config, "evolve", {}))
        assert result.text == "evolved" and not result.is_error
        # The call renewed the listen stream on the new process before it was sent.
        deadline = time.monotonic() + 5
        while pool.changes.get("restarting", 0) == changes:
            assert time.monotonic() < deadline, "the new process's list change never arrived"
            time.sleep(0.05)
        assert pool.cached_tools(config) is None
        again = pool.list_tools_sync(config)
        assert [t.description for t in again if t.name == "shout"] == [
            "The text in capitals, loudly."
        ]
    finally:
        pool.close()
