"""``tool_call_delta`` events (issue 43): a tool call's arguments as the model streams them,
in order, before the call's ``tool_call`` — in the service's stream, over SSE and over the
websocket. A call sent whole has no deltas (``tests/test_turn_events.py``)."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core import ScriptedChatModel, ToolCall
from advisors_app.core.testing import tool_call_response
from advisors_app.definition.runtime import load_chain
from advisors_app.turn import stream_turn
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model
from tests.test_consumers import frames_until_end, open_socket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache"),
]

#: One call streamed in three fragments, as OpenAI-compatible providers send it.
STREAMED_ROUND = [
    tool_call_response(ToolCall("call_a", "calculator", "", index=0), finish_reason=None),
    tool_call_response(ToolCall("", "", '{"expression": ', index=0), finish_reason=None),
    tool_call_response(ToolCall("", "", '"6 * 7"}', index=0)),
]
DELTAS = [
    {"type": "tool_call_delta", "id": "call_a", "name": "calculator", "arguments_delta": piece}
    for piece in ("", '{"expression": ', '"6 * 7"}')
]


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def tools_chain() -> None:
    make_chain(
        "tools",
        model=scripted_model("tools-model", responses=(), repeat=False),
        advisors=(("tool_calling", {}),),
        tools=["calculator"],
    )


def script(*items: Any) -> None:
    model: ScriptedChatModel = load_chain("tools").client.chat_model  # type: ignore[assignment]
    model.add(*items)


def check(payloads: list[dict[str, Any]]) -> None:
    payloads = [{k: v for k, v in p.items() if k != "event_id"} for p in payloads]
    kinds = [p["type"] for p in payloads]
    assert kinds[:6] == ["start", *["tool_call_delta"] * 3, "tool_call", "tool_result"]
    assert payloads[1:4] == DELTAS
    assert payloads[4]["arguments"] == "".join(d["arguments_delta"] for d in DELTAS)
    assert set(kinds[6:-1]) == {"delta"} and kinds[-1] == "done"
    assert payloads[-1]["content"] == "It is 42."


async def test_the_service_stream_sends_the_arguments_as_they_come(
    tools_chain: None, alice: Any
) -> None:
    await sync_to_async(script)(STREAMED_ROUND, ["It is ", "42."])
    check([event.to_dict() async for event in await stream_turn("tools", alice, "6 * 7?")])


def test_sse_sends_the_arguments_as_they_come(tools_chain: None, alice: Any) -> None:
    script(STREAMED_ROUND, ["It is ", "42."])
    response = client_for(alice).post(
        "/api/chains/tools/stream/", {"message": "6 * 7?"}, format="json"
    )
    check([data for _, data in parse_sse(read_stream(response))])


async def test_the_websocket_sends_the_arguments_as_they_come(
    tools_chain: None, alice: Any
) -> None:
    await sync_to_async(script)(STREAMED_ROUND, ["It is ", "42."])
    communicator = await open_socket(alice, "tools")
    try:
        await communicator.send_json_to({"type": "message", "message": "6 * 7?"})
        check(await frames_until_end(communicator))
    finally:
        await communicator.disconnect()


async def test_a_call_turn_has_no_deltas_but_the_same_call(tools_chain: None, alice: Any) -> None:
    """The REST call body reports the call as a stream's done does."""
    await sync_to_async(script)(STREAMED_ROUND, ["It is ", "42."])

    def post() -> dict[str, Any]:
        api = client_for(alice)
        return api.post("/api/chains/tools/call/", {"message": "6 * 7?"}, format="json").json()

    body = await sync_to_async(post)()
    assert [(t["id"], t["arguments"]) for t in body["tools"]] == [
        ("call_a", '{"expression": "6 * 7"}')
    ]
