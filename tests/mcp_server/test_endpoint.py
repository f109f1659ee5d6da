"""Issue 25: an MCP client from the SDK asks chains through the site's MCP endpoint (daphne).

The site runs as it ships (``advisorsite.asgi``, the endpoint on at ``/mcp/``); the client is
the SDK's Streamable HTTP transport with a ``ClientSession`` (the handshake-era protocol) or
its ``Client`` negotiating the 2026-07-28 revision. Chains answer from scripted models.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from advisors_app.models import CallLog, ChatModelConfig, Conversation
from tests.core.providers.openai_server import JsonReply, ScriptedOpenAiServer
from tests.factories import make_chain, scripted_model
from tests.helpers import subprocess_env
from tests.live_server import ROOT
from tests.mcp_server.conftest import INITIALIZE_BODY, KEY, KEY_VARIABLE, mcp, token_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

MEMORY = (("message_chat_memory", {}),)


def desk(answer: str = "Hello from the desk!") -> Any:
    model = scripted_model("desk", responses=(answer,))
    return make_chain("help-desk", model=model, advisors=MEMORY)


async def ask(
    session: ClientSession, arguments: dict[str, Any], tool: str = "ask_help_desk"
) -> Any:
    return await session.call_tool(tool, arguments)


def test_lists_the_chains_answers_and_continues(mcp_site: str, alice: Any) -> None:
    desk()

    async def use(session: ClientSession) -> Any:
        listed = await session.list_tools()
        first = await ask(session, {"message": "Hi"})
        conversation = first.structured_content["conversation_id"]
        second = await ask(session, {"message": "Again", "conversation_id": conversation})
        return listed, first, second

    listed, first, second = mcp(mcp_site, token_of(alice), use)
    (tool,) = listed.tools
    assert (tool.name, tool.title) == ("ask_help_desk", "Help-Desk")
    assert tool.input_schema["required"] == ["message"]
    assert set(tool.input_schema["properties"]) == {"message", "conversation_id", "params"}
    assert tool.input_schema["additionalProperties"] is False
    assert tool.input_schema["properties"]["params"]["type"] == "object"
    assert not first.is_error and not second.is_error
    assert first.content[0].text == "Hello from the desk!"
    conversation = first.structured_content["conversation_id"]
    assert second.structured_content["conversation_id"] == conversation
    assert second.structured_content["message_id"] > first.structured_content["message_id"]
    assert set(first.structured_content) == {
        "conversation_id",
        "message_id",
        "finish_reason",
        "finish_category",
        "trace_id",
        "version",
    }
    (stored,) = Conversation.objects.filter(owner=alice)
    texts = list(stored.messages.order_by("sequence").values_list("text", flat=True))
    assert texts == ["Hi", "Hello from the desk!", "Again", "Hello from the desk!"]
    assert list(CallLog.objects.values_list("status", flat=True)) == ["ok", "ok"]


def test_the_2026_protocol_revision_works_too(mcp_site: str, alice: Any) -> None:
    desk()

    async def run() -> Any:
        headers = {"Authorization": f"Bearer {token_of_sync}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            transport = streamable_http_client(f"{mcp_site}/mcp", http_client=http)
            async with Client(transport, mode="auto") as client:
                tools = await client.list_tools()
                result = await client.call_tool("ask_help_desk", {"message": "Hi"})
                return client.protocol_version, tools, result

    token_of_sync = token_of(alice)  # Bearer: the scheme MCP clients send, same token
    version, tools, result = asyncio.run(run())
    assert version == "2026-07-28"
    assert [t.name for t in tools.tools] == ["ask_help_desk"]
    assert result.content[0].text == "Hello from the desk!"


CALL = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "ask_help_desk", "arguments": {"message": "Hi"}},
}
HEADERS = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"}


@pytest.mark.parametrize(
    "authorization",
    [None, "Token not-a-token", "Bearer", "Basic YWxpY2U6cHc=", "Token a b"],
)
def test_refused_without_a_valid_token_and_nothing_runs(
    mcp_site: str, authorization: str | None
) -> None:
    desk()
    headers = dict(HEADERS, **({"Authorization": authorization} if authorization else {}))
    for body in (INITIALIZE_BODY, CALL):
        answer = httpx2.post(f"{mcp_site}/mcp/", json=body, headers=headers)
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"] == "Token"
        assert answer.json()["error"]["code"] == "not_authenticated"
    assert not CallLog.objects.exists()
    assert not Conversation.objects.exists()


def test_the_sdk_client_is_refused_without_a_token(mcp_site: str) -> None:
    async def use(session: ClientSession) -> Any:
        raise AssertionError("the session must not open")

    statuses: list[int] = []
    with pytest.raises(ExceptionGroup) as refused:
        mcp(mcp_site, None, use, statuses)
    assert refused.group_contains(MCPError)  # the handshake failed: "Server returned an error"
    assert statuses == [401]


def test_an_inactive_users_token_is_refused(mcp_site: str, alice: Any) -> None:
    token = token_of(alice)
    alice.is_active = False
    alice.save()
    headers = dict(HEADERS, Authorization=f"Token {token}")
    answer = httpx2.post(f"{mcp_site}/mcp/", json=INITIALIZE_BODY, headers=headers)
    assert answer.status_code == 401


def test_only_chains_the_caller_may_use_are_tools(mcp_site: str, alice: Any) -> None:
    desk()
    make_chain("switched-off", enabled=False)
    make_chain("unpublished", publish=False)

    async def use(session: ClientSession) -> Any:
        names = [t.name for t in (await session.list_tools()).tools]
        off = await ask(session, {"message": "Hi"}, "ask_switched_off")
        draft = await ask(session, {"message": "Hi"}, "ask_unpublished")
        return names, off, draft

    names, off, draft = mcp(mcp_site, token_of(alice), use)
    assert names == ["ask_help_desk"]
    for refused in (off, draft):
        assert refused.is_error
        assert refused.structured_content["code"] == "not_found"
        assert "list the tools" in refused.content[0].text
    assert not CallLog.objects.exists()


def test_another_users_conversation_cannot_be_continued(
    mcp_site: str, alice: Any, bob: Any
) -> None:
    desk()
    started = mcp(mcp_site, token_of(alice), lambda s: ask(s, {"message": "My secret plan"}))
    conversation = started.structured_content["conversation_id"]

    taken = mcp(
        mcp_site,
        token_of(bob),
        lambda s: ask(s, {"message": "What did I say?", "conversation_id": conversation}),
    )
    # Bob's id names a conversation of his own: alice's stays hers, untouched.
    assert not taken.is_error
    (alices,) = Conversation.objects.filter(owner=alice)
    assert alices.messages.count() == 2
    (bobs,) = Conversation.objects.filter(owner=bob)
    texts = list(bobs.messages.order_by("sequence").values_list("text", flat=True))
    assert texts == ["What did I say?", "Hello from the desk!"]


def test_refusals_and_bad_input_are_tool_errors(mcp_site: str, alice: Any) -> None:
    model = scripted_model("guarded-model", responses=("Never said.",))
    make_chain("guarded", model=model, advisors=(("safe_guard", {"words": ["dynamite"]}),))
    desk()

    async def use(session: ClientSession) -> Any:
        return [
            await ask(session, {"message": "Where is the dynamite?"}, "ask_guarded"),
            await ask(session, {"message": "   "}),
            await ask(session, {"message": "Hi", "label": "staging"}),
            await ask(session, {"message": "Hi", "params": {"options": {"temperature": 9}}}),
            await ask(session, {"message": "Hi", "conversation_id": "no spaces please"}),
            await ask(session, {"message": "Hi"}, "ask_nothing_of_that_name"),
        ]

    guard, blank, label, options, conversation, unknown = mcp(mcp_site, token_of(alice), use)
    assert all(result.is_error for result in (guard, blank, label, options, conversation, unknown))
    assert guard.content[0].text.startswith("I'm unable to respond to that")
    assert guard.structured_content["code"] == "refused"
    assert guard.structured_content["finish_reason"] == "CONTENT_FILTER"
    assert guard.structured_content["finish_category"] == "guardrail"
    assert blank.structured_content["code"] == "invalid"
    assert "message" in blank.structured_content["errors"]
    assert label.structured_content["errors"] == {"label": ["Unknown field."]}
    assert "params.options.temperature" in options.structured_content["errors"]
    assert "params.options.temperature" in options.content[0].text
    assert "conversation_id" in conversation.structured_content["errors"]
    assert "ask_nothing_of_that_name" in unknown.content[0].text
    # The guard's refusal ran (and is logged); the invalid calls never did.
    assert list(CallLog.objects.values_list("chain_slug", flat=True)) == ["guarded"]
    assert not Conversation.objects.filter(messages__isnull=False).exists()


def test_a_provider_error_quoting_the_key_reaches_the_client_redacted(
    mcp_site: str, alice: Any
) -> None:
    server = ScriptedOpenAiServer()
    try:
        message = f"Incorrect API key provided: {KEY}. Find your key in your account."
        error = {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
        server.add(JsonReply({"error": error}, status=401))
        model = ChatModelConfig.objects.create(
            slug="loopback",
            provider="openai",
            model="scripted-model",
            base_url=server.base_url,
            api_key_env=KEY_VARIABLE,
            max_retries=0,
        )
        make_chain("keyed", model=model)
        result = mcp(mcp_site, token_of(alice), lambda s: ask(s, {"message": "Hi"}, "ask_keyed"))
    finally:
        server.stop()
    assert result.is_error
    assert result.structured_content["code"] == "provider_authentication"
    assert "Incorrect API key provided" in result.content[0].text
    dumped = json.dumps(result.model_dump(mode="json"))
    assert KEY not in dumped
    assert CallLog.objects.get().status == "error"


def test_the_docs_client_runs_as_shown(mcp_site: str, alice: Any, tmp_path: Path) -> None:
    model = scripted_model("docs-model", responses=("A list is mutable.", "A tuple is not."))
    make_chain("python-docs", model=model, advisors=MEMORY)
    page = (ROOT / "docs" / "mcp-server.md").read_text()
    [code] = [
        block for block in re.findall(r"```python\n(.*?)```", page, re.DOTALL) if "Client" in block
    ]
    script = tmp_path / "client.py"
    script.write_text(code)
    env = subprocess_env(ADVISORS_MCP_URL=f"{mcp_site}/mcp/", ADVISORS_TOKEN=token_of(alice))
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['ask_python_docs']",
        "A list is mutable.",
        "A tuple is not.",
    ]
    assert Conversation.objects.get(owner=alice).messages.count() == 4


def test_a_chain_using_tools_answers_and_a_paused_one_says_so(mcp_site: str, alice: Any) -> None:
    settings = {
        "responses": ["No tool."],
        "repeat": True,
        "tool_rules": [
            {"when": "compute", "tool": "calculator", "arguments": {"expression": "6 * 7"}}
        ],
        "after_tool": "It is {tool_result}.",
    }
    for slug, policy in (("calc", {}), ("careful-calc", {"calculator": "always"})):
        model = ChatModelConfig.objects.create(slug=slug, provider="scripted", settings=settings)
        calling = ("tool_calling", {"approval": policy} if policy else {})
        make_chain(slug, model=model, advisors=(*MEMORY, calling), tools=["calculator"])

    async def use(session: ClientSession) -> Any:
        message = {"message": "Please compute six times seven"}
        return await ask(session, message, "ask_calc"), await ask(
            session, message, "ask_careful_calc"
        )

    answered, paused = mcp(mcp_site, token_of(alice), use)
    assert not answered.is_error
    assert answered.content[0].text == "It is 42."
    assert paused.is_error
    assert paused.structured_content["code"] == "approval_required"
    assert paused.structured_content["finish_reason"] == "APPROVAL_REQUIRED"
    assert "waits for approval" in paused.content[0].text
