"""Tool search over MCP tools, the admin of MCP servers, and closing the pool."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from advisors_app.core.prompt import ToolCallingChatOptions
from advisors_app.mcp import ServerConfig
from advisors_app.mcp.pool import McpClientPool
from advisors_app.models import McpServer
from advisors_app.models.mcp import url_problems
from advisors_app.turn import call_turn
from tests.factories import make_chain, scripted_model
from tests.mcp.conftest import SERVER, TOKEN
from tests.mcp.test_tools import call, tool_responses

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache", "mcp_settings"),
]


async def test_tool_search_indexes_mcp_tools(django_user_model: Any) -> None:
    user = await django_user_model.objects.acreate(username="ann")

    def build() -> Any:
        from advisors_app.definition.runtime import load_chain

        make_chain(
            "finder",
            model=scripted_model("finder-model", responses=(), repeat=False),
            advisors=(
                ("message_chat_memory", {"max_messages": 20}),
                (
                    "tool_search",
                    {"mcp_servers": [{"server": "local", "tools": ["add", "shout"]}]},
                ),
            ),
        )
        return load_chain("finder").client.chat_model

    model = await sync_to_async(build)()
    model.add(
        call("s1", "toolSearchTool", query="text in capitals"),
        call("c1", "shout", text="found"),
        "FOUND it.",
    )
    outcome = await call_turn("finder", user, "shout found")
    assert outcome.content == "FOUND it."
    first, second, _ = model.prompts
    offered = [cb.name for cb in first.options.tool_callbacks]
    assert offered == ["toolSearchTool"]  # not every tool's schema
    assert isinstance(second.options, ToolCallingChatOptions)
    assert "shout" in [cb.name for cb in second.options.tool_callbacks]
    responses = tool_responses(model)
    assert "shout" in responses[0] and responses[-1] == "FOUND"


# -- admin --------------------------------------------------------------------------------------


def test_an_admin_adds_a_server_by_variable_name_and_sees_its_tools(
    admin_client: Client, http_server: dict[str, Any]
) -> None:
    add = "/admin/advisors_app/mcpserver/add/"
    assert admin_client.get(add).status_code == 200
    form = {
        "slug": "docs",
        "name": "Docs",
        "url": http_server["url"],
        "headers": '{"Authorization": "Bearer sk-live-123"}',
        "connect_timeout": "10",
        "call_timeout": "30",
        "enabled": "on",
    }
    refused = admin_client.post(add, form)
    assert refused.status_code == 200 and not McpServer.objects.exists()
    assert "never the secret itself" in refused.content.decode()
    stdio_slug = admin_client.post(add, {**form, "slug": "local"})
    assert "stdio server" in stdio_slug.content.decode()
    with_user = http_server["url"].replace("://", "://bob:pa55word@")
    for url, said in [
        (with_user, "Remove the credentials (user:password@)"),
        (http_server["url"] + "?tenant=a&access_token=xyz", "query parameter(s) access_token"),
    ]:
        refused = admin_client.post(add, {**form, "url": url})
        page = refused.content.decode()
        assert refused.status_code == 200 and said in page
    assert not McpServer.objects.exists()

    form["headers"] = '{"Authorization": "Bearer ${MCP_TEST_TOKEN}"}'
    response = admin_client.post(add, form)
    assert response.status_code == 302, response.content.decode()[:2000]
    server = McpServer.objects.get(slug="docs")
    page = admin_client.get(f"/admin/advisors_app/mcpserver/{server.pk}/change/").content.decode()
    assert "MCP_TEST_TOKEN set" in page
    assert "<code>add</code>" in page and "Add two integers." in page
    assert TOKEN not in page
    listing = admin_client.get("/admin/advisors_app/mcpserver/").content.decode()
    assert "servers from ADVISORS" in listing and "growing, local, patient, quick" in listing
    assert sys.executable not in listing  # slugs only, never a command line


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("https://host/mcp", False),
        ("https://host/mcp?tenant=a&page=2", False),
        ("https://user@host/mcp", True),
        ("https://:pw@host/mcp", True),
        ("https://host/mcp?api_key=1", True),
        ("https://host/mcp?X-Amz-Signature=1", True),
        ("https://host/mcp?password=", True),
        ("ftp://host/mcp", True),
    ],
)
def test_a_url_with_credentials_or_a_secret_parameter_is_refused(url: str, refused: bool) -> None:
    assert bool(url_problems(url)) is refused


# -- the pool ----------------------------------------------------------------------------------


def test_closing_the_pool_ends_stdio_servers_and_a_later_use_reconnects(tmp_path: Any) -> None:
    pool = McpClientPool()
    config = ServerConfig(
        "own", "stdio", command=sys.executable, args=(SERVER, "stdio"), cwd=str(tmp_path)
    )
    assert [t.name for t in pool.list_tools_sync(config)][:2] == ["add", "shout"]
    connection = pool._connections[config]
    assert pool.cached_tools(config) is not None
    pool.close()
    assert connection.task.done() and pool._connections == {}
    assert pool.cached_tools(config) is None
    result = asyncio.run(pool.call_tool(config, "add", {"a": 1, "b": 1}))
    assert result.text == "2"
    pool.close()
