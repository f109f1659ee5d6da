"""``POST /api/chains/<slug>/ai-sdk/``: the turn as a Vercel AI SDK UI message stream, every
part checked against the protocol's published part schema (``uiMessageChunkSchema`` of the
``ai`` package, its strict objects transcribed below as JSON Schema) and for order."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
from django.test import AsyncClient, override_settings

from advisors_app.core import ProviderUnavailableError, ToolCall
from advisors_app.core.testing import tool_call_response
from advisors_app.definition.tools import tool_registry
from advisors_app.models import ChatMessage, Conversation, ToolApproval
from tests.api.conftest import client_for
from tests.api.views.test_ag_ui import _user, order_status
from tests.api.views.test_chat import read_stream, script
from tests.factories import make_chain, scripted_model
from tests.test_approvals import memo_call, save_memo, saved
from tests.test_consumers import script as ascript

pytestmark = pytest.mark.django_db(transaction=True)

_S: dict[str, Any] = {"type": "string"}
_B: dict[str, Any] = {"type": "boolean"}
_ANY: dict[str, Any] = {}
_META = {"type": "object", "additionalProperties": {"type": "object"}}  # providerMetadata
_TOOL = {"providerExecuted": _B, "providerMetadata": _META, "dynamic": _B, "title": _S}


def _strict(kind: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict:
    """A ``z.strictObject`` of the schema: its fields and no others."""
    return {
        "type": "object",
        "properties": {"type": {"const": kind}, **required, **(optional or {})},
        "required": ["type", *required],
        "additionalProperties": False,
    }


PART_SCHEMAS = {
    "text-start": _strict("text-start", {"id": _S}, {"providerMetadata": _META}),
    "text-delta": _strict("text-delta", {"id": _S, "delta": _S}, {"providerMetadata": _META}),
    "text-end": _strict("text-end", {"id": _S}, {"providerMetadata": _META}),
    "error": _strict("error", {"errorText": _S}),
    "tool-input-start": _strict(
        "tool-input-start", {"toolCallId": _S, "toolName": _S}, {**_TOOL, "_meta": _ANY}
    ),
    "tool-input-delta": _strict("tool-input-delta", {"toolCallId": _S, "inputTextDelta": _S}),
    "tool-input-available": _strict(
        "tool-input-available",
        {"toolCallId": _S, "toolName": _S},
        {"input": _ANY, **_TOOL, "_meta": _ANY},
    ),
    "tool-approval-request": _strict("tool-approval-request", {"approvalId": _S, "toolCallId": _S}),
    "tool-output-available": _strict(
        "tool-output-available",
        {"toolCallId": _S},
        {"output": _ANY, "providerExecuted": _B, "dynamic": _B, "preliminary": _B},
    ),
    "tool-output-error": _strict(
        "tool-output-error",
        {"toolCallId": _S, "errorText": _S},
        {"providerExecuted": _B, "dynamic": _B},
    ),
    "tool-output-denied": _strict("tool-output-denied", {"toolCallId": _S}),
    "source-document": _strict(
        "source-document",
        {"sourceId": _S, "mediaType": _S, "title": _S},
        {"filename": _S, "providerMetadata": _META},
    ),
    "start": _strict("start", {}, {"messageId": _S, "messageMetadata": _ANY}),
    "finish": _strict(
        "finish",
        {},
        {
            "finishReason": {
                "enum": ["stop", "length", "content-filter", "tool-calls", "error", "other"]
            },
            "messageMetadata": _ANY,
        },
    ),
}
_DATA_SCHEMA = {
    "type": "object",
    "properties": {"type": {"pattern": "^data-"}, "id": _S, "data": _ANY, "transient": _B},
    "required": ["type"],
    "additionalProperties": False,
}


@pytest.fixture(autouse=True)
def _tools() -> Iterator[None]:
    saved.clear()
    tool_registry.register(order_status, replace=True)
    tool_registry.register(save_memo, replace=True)
    yield
    tool_registry.unregister("order_status")
    tool_registry.unregister("save_memo")


@pytest.fixture
def chain() -> Any:
    return make_chain(
        "agent",
        model=scripted_model("agent-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 20}), ("tool_calling", {})),
        tools=["order_status", "save_memo"],
    )


def chat_body(text: str, chat: str = "chat-1", **extra: Any) -> dict[str, Any]:
    """What ``useChat`` sends for a new user message."""
    message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
    return {"id": chat, "messages": [message], "trigger": "submit-message", **extra}


def parse_parts(body: str) -> list[dict[str, Any]]:
    """The parts of a UI message stream, each valid against the published schema; the stream
    ends with ``[DONE]``, and the parts come in the protocol's order."""
    lines = []
    for block in body.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        assert block.startswith("data: ") and "\n" not in block, block
        lines.append(block.removeprefix("data: "))
    assert lines[-1] == "[DONE]" and "[DONE]" not in lines[:-1]
    parts = [json.loads(line) for line in lines[:-1]]
    for part in parts:
        schema = _DATA_SCHEMA if part["type"].startswith("data-") else PART_SCHEMAS[part["type"]]
        jsonschema.validate(part, schema)
    check_order(parts)
    return parts


def check_order(parts: list[dict[str, Any]]) -> None:
    assert parts[0]["type"] == "start" and parts[-1]["type"] == "finish"
    assert [p["type"] for p in parts].count("finish") == 1
    open_text: str | None = None
    inputs: set[str] = set()
    for part in parts[1:-1]:
        kind = part["type"]
        if kind == "text-start":
            assert open_text is None
            open_text = part["id"]
        elif kind == "text-delta":
            assert part["id"] == open_text and part["delta"]
        elif kind == "text-end":
            assert part["id"] == open_text
            open_text = None
        elif kind == "tool-input-start":
            assert open_text is None
            inputs.add(part["toolCallId"])
        elif kind in ("tool-input-available", "tool-approval-request"):
            assert part["toolCallId"] in inputs
    assert open_text is None


def post(user: Any, slug: str, body: Any) -> Any:
    return client_for(user).post(f"/api/chains/{slug}/ai-sdk/", body, format="json")


def stream(user: Any, slug: str, body: Any) -> list[dict[str, Any]]:
    response = post(user, slug, body)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response["x-vercel-ai-ui-message-stream"] == "v1"
    return parse_parts(read_stream(response))


def test_a_text_turn_streams_a_text_part(chain: Any, alice: Any) -> None:
    script(chain.slug, ["Hel", "lo!"])
    parts = stream(alice, chain.slug, chat_body("hi"))
    assert [p["type"] for p in parts] == [
        *("start", "text-start", "text-delta", "text-delta", "text-end", "finish"),
    ]
    start, finish = parts[0], parts[-1]
    assert start["messageId"] == start["messageMetadata"]["trace_id"]
    assert start["messageMetadata"]["conversation_id"] == "chat-1"
    assert "".join(p["delta"] for p in parts if p["type"] == "text-delta") == "Hello!"
    assert finish["finishReason"] == "stop"
    assert finish["messageMetadata"]["stored"] is True
    # The chat id is the conversation: the next message continues it.
    script(chain.slug, "Again.")
    history = chat_body("more")["messages"]
    body = chat_body("more")
    body["messages"] = [*chat_body("hi")["messages"], *history]
    stream(alice, chain.slug, body)
    rows = ChatMessage.objects.filter(conversation__conversation_id=f"{alice.pk}:chat-1")
    assert [r.text for r in rows.order_by("sequence")] == ["hi", "Hello!", "more", "Again."]


def test_a_tool_call_turn_streams_its_input_and_output(chain: Any, alice: Any) -> None:
    call = ToolCall("c1", "order_status", json.dumps({"order_id": "42"}))
    script(chain.slug, tool_call_response(call), "Shipped.")
    parts = stream(alice, chain.slug, chat_body("where is order 42?"))
    assert [p["type"] for p in parts] == [
        "start",
        "tool-input-start",
        "tool-input-available",
        "tool-output-available",
        *("text-start", "text-delta", "text-end", "finish"),
    ]
    assert parts[2]["input"] == {"order_id": "42"} and parts[2]["toolName"] == "order_status"
    assert parts[3]["toolCallId"] == "c1" and parts[3]["output"]["ok"] is True


def test_sources_are_source_document_parts(alice: Any) -> None:
    from advisors_app.ingestion.pipeline import ingest_text
    from advisors_app.models import Collection

    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.")
    rag = make_chain(
        "rag",
        model=scripted_model("rag-model", responses=("Five days.",)),
        advisors=(("question_answer", {"collection": "kb"}),),
    )
    parts = stream(alice, rag.slug, chat_body("How long do refunds take?"))
    [source] = [p for p in parts if p["type"] == "source-document"]
    assert (source["title"], source["mediaType"], source["filename"]) == (
        "policy.md",
        "text/markdown",
        "policy.md",
    )
    assert source["providerMetadata"]["advisors"]["snippet"]
    assert [p["type"] for p in parts].index("source-document") < [p["type"] for p in parts].index(
        "text-start"
    )


def test_a_failed_turn_sends_an_error_part_then_finishes(chain: Any, alice: Any) -> None:
    script(chain.slug, ["partial ", ProviderUnavailableError("down", status=503)])
    parts = stream(alice, chain.slug, chat_body("hi"))
    assert [p["type"] for p in parts] == [
        *("start", "text-start", "text-delta", "text-end", "error", "finish"),
    ]
    assert parts[-2]["errorText"] == "down" and parts[-1]["finishReason"] == "error"


def test_a_guard_refusal_finishes_as_a_content_filter(alice: Any) -> None:
    guarded = make_chain(
        "guarded",
        model=scripted_model("guarded-model", responses=("Sure.",)),
        advisors=(("safe_guard", {"words": ["keylogger"]}), ("message_chat_memory", {})),
    )
    parts = stream(alice, guarded.slug, chat_body("write a keylogger"))
    assert parts[-1]["finishReason"] == "content-filter"
    assert parts[-1]["messageMetadata"]["stored"] is False
    assert not Conversation.objects.exists()


def test_an_approval_request_is_answered_by_the_next_request(chain: Any, alice: Any) -> None:
    script(chain.slug, memo_call("m1"), "Saved it.")
    parts = stream(alice, chain.slug, chat_body("Save a memo: milk"))
    assert [p["type"] for p in parts] == [
        *("start", "tool-input-start", "tool-input-available", "tool-approval-request"),
        "finish",
    ]
    assert parts[3] == {"type": "tool-approval-request", "approvalId": "m1", "toolCallId": "m1"}
    assert parts[-1]["finishReason"] == "tool-calls" and saved == []
    # addToolApprovalResponse: the paused message, its tool part answered, sent back.
    paused = {
        "id": parts[0]["messageId"],
        "role": "assistant",
        "parts": [
            {
                "type": "tool-save_memo",
                "toolCallId": "m1",
                "state": "approval-responded",
                "input": {"text": "milk"},
                "approval": {"id": "m1", "approved": True},
            }
        ],
    }
    body = chat_body("Save a memo: milk")
    body["messages"].append(paused)
    parts = stream(alice, chain.slug, body)
    assert "messageId" not in parts[0]  # the paused message goes on
    assert [p["type"] for p in parts] == [
        *("start", "tool-output-available", "text-start", "text-delta", "text-end", "finish"),
    ]
    assert saved == [("milk", "alice")] and ToolApproval.objects.get().status == "approved"


def test_a_rejected_approval_is_a_denied_tool_output(chain: Any, alice: Any) -> None:
    script(chain.slug, memo_call("m1"), "Not saved.")
    stream(alice, chain.slug, chat_body("Save a memo: milk"))
    answer = {"id": "m1", "approved": False, "reason": "no"}
    body = chat_body("x")
    body["messages"].append({"id": "a", "role": "assistant", "parts": [
        {"type": "tool-save_memo", "toolCallId": "m1", "state": "approval-responded",
         "approval": answer},
    ]})  # fmt: skip
    parts = stream(alice, chain.slug, body)
    assert parts[1] == {"type": "tool-output-denied", "toolCallId": "m1"}
    assert saved == [] and ToolApproval.objects.get().status == "rejected"


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (["hi"], {"non_field_errors"}),
        ({"id": "c"}, {"messages"}),
        ({"id": "c", "messages": []}, {"messages"}),
        (chat_body("   "), {"messages"}),
        (chat_body("hi", chat="../x"), {"id"}),
        (chat_body("hi", trigger="regenerate-message"), {"trigger"}),
        (chat_body("hi", extra=1), {"extra"}),
        (chat_body("hi", params={"options": {"temperature": 9}}), {"params.options.temperature"}),
        ({"id": "c", "messages": [{"id": "u", "role": "user", "parts": [{"type": "file"}]}]},
         {"messages.0.parts"}),
        ({"id": "c", "messages": [{"id": "a", "role": "assistant", "parts": [
            {"type": "tool-x", "state": "approval-responded", "approval": {"id": "zz"}}]}]},
         {"messages"}),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_with_field_errors(
    chain: Any, alice: Any, body: Any, fields: set[str]
) -> None:
    response = post(alice, chain.slug, body)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["code"] == "invalid" and set(error["fields"]) == fields, error
    assert not Conversation.objects.exists()


def test_anonymous_callers_are_refused(chain: Any) -> None:
    response = client_for(None).post("/api/chains/agent/ai-sdk/", chat_body("hi"), format="json")
    assert response.status_code == 401


@override_settings(ADVISORS={"DISCONNECT_POLICY": "continue"})
async def test_use_chat_reconnects_to_a_running_turn(chain: Any, alice: Any) -> None:
    """``resume: true``: the turn still running after its client left is sent again from its
    start; once it ended (or for another user) there is nothing to reconnect to."""
    await ascript(chain.slug, [f"w{n} " for n in range(10)], delay=0.03)
    client = AsyncClient()
    await client.aforce_login(alice)
    response = await client.post(
        f"/api/chains/{chain.slug}/ai-sdk/", chat_body("count"), content_type="application/json"
    )
    read = 0

    async def reader() -> None:
        nonlocal read
        async for _ in response.streaming_content:
            read += 1

    task = asyncio.create_task(reader())
    while read < 2:  # the start and the first text: the turn runs
        await asyncio.sleep(0.005)
    task.cancel()  # the page reloads: the server cancels the task streaming the response
    await asyncio.gather(task, return_exceptions=True)
    url = f"/api/chains/{chain.slug}/ai-sdk/chat-1/stream/"
    again = await client.get(url)
    assert again.status_code == 200 and again["x-vercel-ai-ui-message-stream"] == "v1"
    body = b"".join([part async for part in again.streaming_content]).decode()
    resumed = parse_parts(body)
    text = "".join(p["delta"] for p in resumed if p["type"] == "text-delta")
    assert text == "".join(f"w{n} " for n in range(10))
    assert (await client.get(url)).status_code == 204  # it ended
    assert (await client.get(f"/api/chains/{chain.slug}/ai-sdk/other/stream/")).status_code == 204
    other = AsyncClient()
    await other.aforce_login(await _user("bob"))
    assert (await other.get(url)).status_code == 204  # not bob's chat
    bad = await client.get(f"/api/chains/{chain.slug}/ai-sdk/a%20b/stream/")
    assert bad.status_code == 400 and set((bad.json())["error"]["fields"]) == {"id"}
    assert (await AsyncClient().get(url)).status_code == 401
