"""MCP tools in stored chains: snapshot pinning and the draft diff, the collision lint, approval
of an MCP tool, and calls over REST, Server-Sent Events and the websocket."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework.test import APIClient

from advisors_app.core.tools import tool
from advisors_app.definition import diff_snapshots, lint, publish, resolve_draft
from advisors_app.definition.runtime import load_chain
from advisors_app.definition.tools import tool_registry
from advisors_app.mcp import mcp_pool, stdio_config
from advisors_app.models import AdvisorChain, McpServer
from advisors_app.turn import call_turn
from advisors_app.turn.input import TurnInput
from tests.admin.forms import chain_form
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model
from tests.mcp.test_tools import call, http_row, mcp_chain, tool_responses
from tests.test_consumers import frames_until_end, open_socket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache", "mcp_settings"),
]


def draft(slug: str, servers: list[dict[str, Any]]) -> AdvisorChain:
    return make_chain(
        slug,
        model=scripted_model(f"{slug}-model"),
        advisors=(("tool_calling", {"mcp_servers": servers}),),
        publish=False,
    )


def lint_ids(chain: AdvisorChain) -> dict[str, str]:
    return {m.id: m.message for m in lint(resolve_draft(chain))}


# -- snapshot pinning -----------------------------------------------------------------------


def test_a_published_version_keeps_its_tool_list_when_the_server_changes() -> None:
    mcp_chain("pinned", [{"server": "growing", "tools": ["shout"]}])
    chain = AdvisorChain.objects.get(slug="pinned")
    published = load_chain("pinned").snapshot
    [shout] = published["references"]["mcp_server:growing"]["tools"]
    assert shout["description"] == "The text in capitals."
    assert shout["input_schema"]["required"] == ["text"]

    growing = stdio_config("growing")
    assert growing is not None
    changes = mcp_pool.changes.get("growing", 0)
    result = asyncio.run(mcp_pool.call_tool(growing, "evolve", {}))
    assert result.text == "evolved"
    deadline = time.monotonic() + 5
    while mcp_pool.changes.get("growing", 0) == changes:
        assert time.monotonic() < deadline, "no list-changed notice arrived"
        time.sleep(0.05)

    # The draft sees the new description; the published version does not.
    now = resolve_draft(chain)
    assert now["references"]["mcp_server:growing"]["tools"][0]["description"] == (
        "The text in capitals, loudly."
    )
    offered = load_chain("pinned").tool_options.tool_callbacks
    assert [cb.definition.description for cb in offered] == ["The text in capitals."]
    diff = diff_snapshots(published, now, names=("v1", "draft"))
    assert diff["changed"] and "loudly" in diff["text"]
    assert diff["mcp_tools"] == [
        {"server": "growing", "added": [], "removed": [], "changed": ["shout"]}
    ]
    version, created = publish(chain, message="new tool description")
    assert created and version.number == 2


# -- lint -------------------------------------------------------------------------------------


@pytest.fixture
def python_calc_add() -> Iterator[None]:
    @tool(name="calc_add")
    def calc_add(a: int, b: int) -> int:
        """Adds, in Python."""
        return a + b

    tool_registry.register(calc_add, replace=True)
    yield
    tool_registry.unregister("calc_add")


@pytest.mark.usefixtures("python_calc_add")
def test_a_prefixed_mcp_tool_named_like_a_python_tool_is_e118() -> None:
    found = lint_ids(draft("clash", [{"server": "local", "tools": ["add"], "prefix": "calc_"}]))
    assert "E118" in " ".join(found) and "calc_add" in found["advisors_app.E118"]
    assert "registered Python tool" in found["advisors_app.E118"]
    # Another prefix resolves it.
    fine = draft("fine", [{"server": "local", "tools": ["add"], "prefix": "mcp_"}])
    assert "advisors_app.E118" not in lint_ids(fine)


def test_an_offered_name_model_apis_refuse_is_e121() -> None:
    long_tool = "page_by_its_full_title_and_lang"  # 31 characters
    found = lint_ids(draft("long", [{"server": "local", "tools": [long_tool], "prefix": "p" * 40}]))
    assert "1 to 64" in found["advisors_app.E121"] and long_tool in found["advisors_app.E121"]
    fine = draft("short", [{"server": "local", "tools": [long_tool], "prefix": "p" * 33}])
    assert "advisors_app.E121" not in lint_ids(fine)  # exactly 64
    # A dot is not allowed in a prefix (OpenAI's function-name rule): the params' schema says so.
    dotted = lint_ids(draft("dotted", [{"server": "local", "tools": ["add"], "prefix": "a."}]))
    assert "advisors_app.E109" in dotted


def test_two_servers_offering_one_name_is_e118(http_server: dict[str, Any]) -> None:
    http_row(http_server["url"])
    chain = draft(
        "two", [{"server": "local", "tools": ["add"]}, {"server": "remote", "tools": ["add"]}]
    )
    message = lint_ids(chain)["advisors_app.E118"]
    assert "'remote'" in message and "'local'" in message
    prefixed = draft(
        "two-ok",
        [
            {"server": "local", "tools": ["add"]},
            {"server": "remote", "tools": ["add"], "prefix": "r_"},
        ],
    )
    assert "advisors_app.E118" not in lint_ids(prefixed)


def test_unknown_tools_servers_and_unavailable_servers_are_lint_errors(
    http_server: dict[str, Any],
) -> None:
    assert "advisors_app.E119" in lint_ids(draft("nope", [{"server": "local", "tools": ["nope"]}]))
    assert "advisors_app.E110" in lint_ids(draft("ghost", [{"server": "ghost", "tools": ["x"]}]))
    http_row(http_server["url"], slug="off", enabled=False)
    found = lint_ids(draft("off", [{"server": "off", "tools": ["add"]}]))
    assert "disabled" in found["advisors_app.E120"]


def test_an_unset_header_variable_blocks_publishing_naming_it(
    http_server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MCP_TEST_TOKEN")
    http_row(http_server["url"], slug="locked")
    found = lint_ids(draft("locked", [{"server": "locked", "tools": ["add"]}]))
    assert "MCP_TEST_TOKEN" in found["advisors_app.E120"]


# -- approval ----------------------------------------------------------------------------------


async def test_approval_applies_to_an_mcp_tool(django_user_model: Any) -> None:
    user = await django_user_model.objects.acreate(username="ann")

    def build() -> Any:
        make_chain(
            "guarded",
            model=scripted_model("guarded-model", responses=(), repeat=False),
            advisors=(
                ("message_chat_memory", {"max_messages": 20}),
                (
                    "tool_calling",
                    {
                        "mcp_servers": [{"server": "local", "tools": ["add"], "prefix": "calc_"}],
                        "approval": {"calc_add": "always"},
                    },
                ),
            ),
        )
        return load_chain("guarded").client.chat_model

    model = await sync_to_async(build)()
    model.add(call("c1", "calc_add", a=20, b=22), "It is 42.")
    paused = await call_turn("guarded", user, "20+22?")
    assert paused.finish_reason == "APPROVAL_REQUIRED"
    [pending] = paused.pending_approvals
    assert pending["tool"] == "calc_add" and pending["arguments"] == {"a": 20, "b": 22}
    assert tool_responses(model) == []  # nothing ran

    decision = {"approval_id": "c1", "decision": "approve"}
    resumed = await call_turn(
        "guarded", user, TurnInput(None, paused.conversation_id, decisions=[decision])
    )
    assert resumed.content == "It is 42." and tool_responses(model) == ["42"]


# -- transports (the HTTP server) --------------------------------------------------------------


def test_rest_call_and_sse_stream_use_an_http_mcp_tool(
    http_server: dict[str, Any], django_user_model: Any
) -> None:
    http_row(http_server["url"])
    model = mcp_chain("remote-calc", [{"server": "remote", "tools": ["add", "fail"]}])
    api = APIClient()
    api.force_authenticate(django_user_model.objects.create_user("ann"))

    model.add(call("c1", "add", a=1, b=2), "Three.")
    response = api.post("/api/chains/remote-calc/call/", {"message": "1+2"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["content"] == "Three." and tool_responses(model) == ["3"]

    model.add(call("c2", "fail", reason="quota"), ["Could ", "not."])
    response = api.post("/api/chains/remote-calc/stream/", {"message": "go"}, format="json")
    events = parse_sse(read_stream(response))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and "tool_call" in kinds and kinds[-1] == "done"
    [result] = [data for kind, data in events if kind == "tool_result"]
    assert result["ok"] is False and "cannot do it: quota" in result["error"]
    assert events[-1][1]["content"] == "Could not."
    assert "cannot do it: quota" in tool_responses(model)[-1]


async def test_websocket_turn_uses_an_http_mcp_tool(
    http_server: dict[str, Any], django_user_model: Any
) -> None:
    user = await django_user_model.objects.acreate(username="ann")
    await sync_to_async(http_row)(http_server["url"])
    model = await sync_to_async(mcp_chain)("ws-calc", [{"server": "remote", "tools": ["shout"]}])
    model.add(call("c1", "shout", text="hi"), ["HI ", "it is."])
    socket = await open_socket(user, "ws-calc")
    try:
        await socket.send_json_to({"type": "message", "message": "shout hi"})
        frames = await frames_until_end(socket, timeout=20)
    finally:
        await socket.disconnect()
    kinds = [frame["type"] for frame in frames]
    assert "tool_call" in kinds and "tool_result" in kinds and kinds[-1] == "done"
    assert frames[-1]["content"] == "HI it is." and tool_responses(model) == ["HI"]


def test_no_header_value_reaches_the_snapshot(http_server: dict[str, Any]) -> None:
    http_row(http_server["url"])
    mcp_chain("quiet", [{"server": "remote", "tools": ["add"]}])
    text = json.dumps(load_chain("quiet").snapshot)
    from tests.mcp.conftest import TOKEN

    assert TOKEN not in text and "${MCP_TEST_TOKEN}" in text
    assert McpServer.objects.get(slug="remote").headers == {
        "Authorization": "Bearer ${MCP_TEST_TOKEN}"
    }


def test_restoring_a_version_never_creates_a_server_and_says_so(
    http_server: dict[str, Any],
) -> None:
    from advisors_app.definition import apply_snapshot

    http_row(http_server["url"])
    mcp_chain("moved", [{"server": "remote", "tools": ["add"]}])
    # As exported elsewhere: a server this database does not have (and rows are protected
    # while a labelled version refers to them).
    text = json.dumps(load_chain("moved").snapshot).replace('"remote"', '"gone"')
    snapshot = json.loads(text.replace('"mcp_server:remote"', '"mcp_server:gone"'))
    notes = apply_snapshot(AdvisorChain.objects.get(slug="moved"), snapshot)
    assert notes == ["MCP server 'gone' does not exist here; add it"]
    assert list(McpServer.objects.values_list("slug", flat=True)) == ["remote"]


def test_the_admin_names_the_lint_code_when_it_refuses_a_save(admin_client: Any) -> None:
    params = {"mcp_servers": [{"server": "local", "tools": ["nope"]}]}
    data = chain_form(
        chat_model=scripted_model("coded").pk,
        rows=[{"advisor_type": "tool_calling", "params": params}],
    )
    refused = admin_client.post("/admin/advisors_app/advisorchain/add/", data)
    assert refused.status_code == 200 and not AdvisorChain.objects.exists()
    assert "advisors_app.E119: " in refused.content.decode()
