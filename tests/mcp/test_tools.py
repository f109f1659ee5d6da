"""Chains using MCP tools, against real servers: discovery, allowlist and prefix, calls in call
and stream through the turn service, errors, timeout, cancellation and list-changed refresh."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core import ScriptedChatModel, ToolCall
from advisors_app.core.messages import ToolResponseMessage
from advisors_app.core.testing import tool_call_response
from advisors_app.definition import compile_snapshot
from advisors_app.definition.runtime import load_chain
from advisors_app.mcp import McpServerError, McpToolCallback, mcp_pool, stdio_config
from advisors_app.mcp.discovery import server_config
from advisors_app.models import McpServer
from advisors_app.turn import call_turn, stream_turn
from tests.factories import make_chain, scripted_model
from tests.mcp.conftest import TOKEN

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache", "mcp_settings"),
]


def mcp_chain(slug: str, servers: list[dict[str, Any]], **loop: Any) -> ScriptedChatModel:
    """A published chain whose tool loop enables ``servers``; its scripted model, to script."""
    make_chain(
        slug,
        model=scripted_model(f"{slug}-model", responses=(), repeat=False),
        advisors=(("tool_calling", {"mcp_servers": servers, **loop}),),
    )
    return load_chain(slug).client.chat_model  # type: ignore[return-value]


def call(call_id: str, name: str, **arguments: Any) -> Any:
    return tool_call_response(ToolCall(call_id, name, json.dumps(arguments)))


def tool_responses(model: ScriptedChatModel) -> list[str]:
    return [
        response.response_data
        for prompt in model.prompts
        for message in prompt.instructions
        if isinstance(message, ToolResponseMessage)
        for response in message.responses
    ]


def http_row(url: str, **fields: Any) -> McpServer:
    return McpServer.objects.create(
        slug=fields.pop("slug", "remote"),
        url=url,
        headers={"Authorization": "Bearer ${MCP_TEST_TOKEN}"},
        **fields,
    )


# -- discovery ----------------------------------------------------------------------------------


def test_discovery_over_stdio_and_http(http_server: dict[str, Any]) -> None:
    local = stdio_config("local")
    assert local is not None and local.transport == "stdio"
    names = [tool.name for tool in mcp_pool.list_tools_sync(local)]
    assert names == [
        "add",
        "shout",
        "fail",
        "slow",
        "grow",
        "evolve",
        "page_by_its_full_title_and_lang",
    ]
    http_row(http_server["url"])
    remote = server_config("remote")
    assert remote is not None and remote.transport == "http"
    [add] = [t for t in mcp_pool.list_tools_sync(remote) if t.name == "add"]
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]
    # The token is read from the environment when connecting, never kept in the config.
    assert TOKEN not in repr(remote) and TOKEN not in json.dumps(remote.headers)


def test_the_allowlist_and_prefix_decide_what_the_model_sees() -> None:
    mcp_chain("calc", [{"server": "local", "tools": ["add", "shout"], "prefix": "calc_"}])
    compiled = load_chain("calc")
    offered = {cb.name: cb for cb in compiled.tool_options.tool_callbacks}
    assert sorted(offered) == ["calc_add", "calc_shout"]
    assert isinstance(offered["calc_add"], McpToolCallback)
    assert offered["calc_add"].definition.description == "Add two integers."
    pinned = compiled.snapshot["references"]["mcp_server:local"]
    assert [tool["name"] for tool in pinned["tools"]] == ["add", "shout"]  # only the allowed
    assert pinned["transport"] == "stdio" and "command" not in pinned


# -- calls through the service ----------------------------------------------------------------


async def test_a_tool_call_in_call_and_in_stream(django_user_model: Any) -> None:
    user = await django_user_model.objects.acreate(username="ann")
    model = await sync_to_async(mcp_chain)(
        "calc", [{"server": "local", "tools": ["add"], "prefix": "calc_"}]
    )
    model.add(call("c1", "calc_add", a=2, b=3), "It is 5.")
    outcome = await call_turn("calc", user, "2+3?")
    assert outcome.content == "It is 5."
    assert tool_responses(model) == ["5"]

    model.add(call("c2", "calc_add", a=4, b=4), ["It is ", "8."])
    events = [event async for event in await stream_turn("calc", user, "4+4?")]
    kinds = [event.type for event in events]
    assert "tool_call" in kinds and "tool_result" in kinds and kinds[-1] == "done"
    assert tool_responses(model)[-1] == "8"


async def test_the_loop_limits_apply_to_mcp_tools(django_user_model: Any) -> None:
    user = await django_user_model.objects.acreate(username="ann")
    model = await sync_to_async(mcp_chain)(
        "capped", [{"server": "local", "tools": ["add"]}], max_identical_calls=1
    )
    model.add(call("c1", "add", a=1, b=1), call("c2", "add", a=1, b=1), "Unreached.")
    outcome = await call_turn("capped", user, "again and again")
    assert outcome.finish_reason == "toolCallLimitExceeded"
    assert tool_responses(model) == ["2"]  # the repeat never reached the server


async def test_server_errors_become_tool_errors(
    django_user_model: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="advisors_app.core.tools.manager")
    user = await django_user_model.objects.acreate(username="ann")
    model = await sync_to_async(mcp_chain)(
        "errs", [{"server": "local", "tools": ["fail"]}, {"server": "quick", "tools": ["slow"]}]
    )
    model.add(call("c1", "fail", reason="no disk"), "Sorry.")
    outcome = await call_turn("errs", user, "try")
    assert outcome.content == "Sorry."
    [error] = tool_responses(model)
    assert error.startswith("Error executing tool 'fail':") and "cannot do it: no disk" in error

    # A call slower than the server's call timeout (0.5 s) is a tool error, not a hang.
    model.add(call("c2", "slow", seconds=10), "Too slow.")
    started = time.monotonic()
    outcome = await call_turn("errs", user, "wait")
    assert outcome.content == "Too slow." and time.monotonic() - started < 5
    assert "timed out after 0.5 s" in tool_responses(model)[-1]
    # Expected failures are one WARNING line each, without a traceback.
    failed = [r for r in caplog.records if r.name == "advisors_app.core.tools.manager"]
    assert [r.levelno for r in failed] == [logging.WARNING, logging.WARNING]
    assert not any(r.exc_info for r in failed)
    assert "cannot do it" in failed[0].getMessage() and "timed out" in failed[1].getMessage()


async def test_an_unreachable_server_is_a_tool_error(http_server: dict[str, Any]) -> None:
    await sync_to_async(http_row)(http_server["url"])
    await sync_to_async(mcp_chain)("far", [{"server": "remote", "tools": ["add"]}])
    snapshot = dict((await sync_to_async(load_chain)("far")).snapshot)
    # The published configuration, pointing at a port nobody listens on.
    dead = dict(snapshot["references"]["mcp_server:remote"], url="http://127.0.0.1:9/mcp")
    snapshot["references"] = {**snapshot["references"], "mcp_server:remote": dead}
    compiled = await sync_to_async(compile_snapshot)(snapshot)
    model: ScriptedChatModel = compiled.client.chat_model  # type: ignore[assignment]
    model.add(call("c1", "add", a=1, b=1), "It is down.")
    answer = await compiled.client.prompt("1+1").acall()
    assert answer.content() == "It is down."
    [error] = tool_responses(model)
    assert "unreachable" in error and TOKEN not in error


async def test_cancelling_the_turn_cancels_the_call(mcp_settings: Path) -> None:
    local = stdio_config("quick")
    assert local is not None
    await mcp_pool.list_tools(local)  # connected: the call below reaches the server
    task = asyncio.ensure_future(mcp_pool.call_tool(local, "slow", {"seconds": 30}, timeout=60))
    await asyncio.sleep(0.5)
    started = time.monotonic()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert time.monotonic() - started < 1
    # The server saw the request cancelled (the SDK sends notifications/cancelled).
    deadline = time.monotonic() + 5
    while not (mcp_settings.exists() and "cancelled" in mcp_settings.read_text()):
        assert time.monotonic() < deadline, "the server never saw the cancellation"
        await asyncio.sleep(0.1)


async def test_cancelling_a_streamed_turn_cancels_its_mcp_call(
    mcp_settings: Path, django_user_model: Any
) -> None:
    user = await django_user_model.objects.acreate(username="ann")
    model = await sync_to_async(mcp_chain)("waits", [{"server": "patient", "tools": ["slow"]}])
    model.add(call("c1", "slow", seconds=30), "Never.")
    seen: list[str] = []

    async def consume() -> None:
        async for event in await stream_turn("waits", user, "wait long"):
            seen.append(event.type)

    turn = asyncio.ensure_future(consume())
    deadline = time.monotonic() + 20
    while "tool_call" not in seen:
        assert time.monotonic() < deadline and not turn.done(), seen
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)  # the request is on the server
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    deadline = time.monotonic() + 5
    while not (mcp_settings.exists() and "cancelled" in mcp_settings.read_text()):
        assert time.monotonic() < deadline, "the server never saw the cancellation"
        await asyncio.sleep(0.1)


async def test_list_changed_refreshes_the_discovered_tools() -> None:
    growing = stdio_config("growing")
    assert growing is not None
    before = await mcp_pool.list_tools(growing)
    assert "extra" not in [tool.name for tool in before]
    assert mcp_pool.cached_tools(growing) == before  # cached for the TTL
    changes = mcp_pool.changes.get("growing", 0)
    result = await mcp_pool.call_tool(growing, "grow", {})
    assert result.text == "grown" and not result.is_error
    deadline = time.monotonic() + 5
    while mcp_pool.changes.get("growing", 0) == changes:
        assert time.monotonic() < deadline, "no list-changed notice arrived"
        await asyncio.sleep(0.05)
    assert mcp_pool.cached_tools(growing) is None
    after = await mcp_pool.list_tools(growing)
    assert "extra" in [tool.name for tool in after]


def test_a_broken_settings_entry_names_the_field(settings: Any) -> None:
    settings.ADVISORS = {**settings.ADVISORS, "MCP_SERVERS": {"bad": {"command": ""}}}
    with pytest.raises(ValueError, match=r"\['bad'\]\['command'\]"):
        stdio_config("bad")


def test_an_unset_header_variable_is_named_never_valued(
    http_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_TEST_TOKEN")
    http_row(http_server["url"], slug="nokey")
    config = server_config("nokey")
    assert config is not None
    with pytest.raises(McpServerError, match="MCP_TEST_TOKEN"):
        mcp_pool.list_tools_sync(config)


def test_a_bad_stdio_entry_fails_manage_py_check(settings: Any) -> None:
    from advisors_app.checks import check_settings

    settings.ADVISORS = {
        **settings.ADVISORS,
        "MCP_SERVERS": {"files": {"command": "npx", "args": "-y server"}},
    }
    [error] = check_settings(None)
    assert error.id == "advisors_app.E009" and "['files']['args']" in error.msg
    settings.ADVISORS = {**settings.ADVISORS, "MCP_SERVERS": {"bad slug": {"command": "x"}}}
    [error] = check_settings(None)
    assert "must be a slug" in error.msg


def test_discovery_is_cached_for_the_ttl(settings: Any) -> None:
    local = stdio_config("local")
    assert local is not None
    mcp_pool.list_tools_sync(local)
    assert mcp_pool.cached_tools(local) is not None
    settings.ADVISORS = {**settings.ADVISORS, "MCP_DISCOVERY_TTL_SECONDS": 0.0}
    mcp_pool.invalidate(local)
    mcp_pool.list_tools_sync(local)
    time.sleep(0.01)
    assert mcp_pool.cached_tools(local) is None  # expired: the next use lists again


async def test_an_unexpected_tool_exception_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from advisors_app.core import Prompt, ToolCallingChatOptions, UserMessage
    from advisors_app.core.tools import ToolCallingManager, tool

    @tool(description="Always breaks.")
    def broken() -> str:
        raise KeyError("bug")

    @tool(description="Times out.")
    def late() -> str:
        raise TimeoutError("too late")

    caplog.set_level(logging.WARNING, logger="advisors_app.core.tools.manager")
    prompt = Prompt((UserMessage("go"),), ToolCallingChatOptions(tool_callbacks=(broken, late)))
    await ToolCallingManager().execute_tool_calls(
        prompt, tool_call_response(("broken", {}), ("late", {}))
    )
    records = {r.getMessage().split(":")[0]: r for r in caplog.records}
    assert records["tool 'broken' failed"].exc_info  # a bug: its traceback is wanted
    assert not records["tool 'late' failed"].exc_info  # expected: one line
