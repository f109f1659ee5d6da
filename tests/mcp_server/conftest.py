"""Fixtures of the MCP endpoint tests: the example site under daphne, users with API tokens,
and an MCP client from the official SDK (Streamable HTTP transport + ``ClientSession``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, TypeVar

import httpx2
import pytest
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rest_framework.authtoken.models import Token

from tests.helpers import database_url_for_subprocess
from tests.live_server import LiveServer

T = TypeVar("T")

#: The environment variable the keyed model's configuration names, and the key in it. Its name
#: says it holds a key: the server process learns variables named only by model-config rows
#: that another process saved up to ``redaction.DATABASE_TTL`` seconds late.
KEY_VARIABLE = "MCP_LOOPBACK_API_KEY"
KEY = "loopback-mcp-5e4d3c2b1a09f8e7d6"

#: A handshake-era ``initialize`` request, as raw JSON-RPC.
INITIALIZE_BODY = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


@pytest.fixture(scope="session")
def mcp_site(django_db_setup: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of the example site under daphne (the MCP endpoint on, as the site ships it)
    on the test database; rows a test writes must be committed (``transaction=True``)."""
    log = tmp_path_factory.mktemp("mcp-daphne") / "server.log"
    env = {"DATABASE_URL": database_url_for_subprocess(), KEY_VARIABLE: KEY}
    with LiveServer(log, **env) as server:
        yield server.url


def token_of(user: Any) -> str:
    return str(Token.objects.get_or_create(user=user)[0].key)


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


async def with_session(
    url: str,
    token: str | None,
    use: Callable[[ClientSession], Awaitable[T]],
    statuses: list[int] | None = None,
) -> T:
    """``use(session)`` on an initialized MCP session with ``url``'s endpoint, sending
    ``Authorization: Token <token>`` (none when ``token`` is ``None``); the HTTP status of each
    response is appended to ``statuses``."""
    headers = {"Authorization": f"Token {token}"} if token is not None else {}

    async def record(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    hooks = {"response": [record]}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60, event_hooks=hooks) as http,
        streamable_http_client(f"{url}/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await use(session)


def mcp(
    url: str,
    token: str | None,
    use: Callable[[ClientSession], Awaitable[T]],
    statuses: list[int] | None = None,
) -> T:
    """:func:`with_session` from a synchronous test (the ORM stays on the test's thread)."""
    return asyncio.run(with_session(url, token, use, statuses))
