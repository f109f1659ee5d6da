"""Typed turn events and the turn outcome on every transport (issue 17).

A stream is ``start``, ``sources`` (retrieval ran), ``tool_call`` / ``tool_result`` for each
call of a tool round, ``delta``..., then ``done``: in the service, over SSE and over the
websocket. The outcome (``call`` body, ``done`` frame) names the sources, the tools and the
timings, and the stored reply keeps them, so a reopened conversation (the conversation API)
shows what the live reply showed.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from rest_framework.test import APIClient

from advisors_app.core import RateLimitedError, ScriptedChatModel
from advisors_app.core.testing import tool_call_response
from advisors_app.definition.runtime import ChainConfigurationError, load_chain
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import CallLog, ChatMessage, Collection
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import TurnError
from advisors_app.turn.input import TurnInput
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model
from tests.test_consumers import frames_until_end, open_socket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache"),
]

TOOL_ROUND = tool_call_response(("calculator", {"expression": "6 * 7"}), ("no_such_tool", {}))


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def tools_chain() -> Any:
    return make_chain(
        "tools",
        model=scripted_model("tools-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}), ("tool_calling", {})),
        tools=["calculator"],
    )


@pytest.fixture
def rag_chain() -> Any:
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.")
    return make_chain(
        "rag",
        model=scripted_model("rag-model", responses=(), repeat=False),
        advisors=(("question_answer", {"collection": "kb", "top_k": 3}),),
    )


def script(slug: str, *items: Any) -> ScriptedChatModel:
    model: ScriptedChatModel = load_chain(slug).client.chat_model  # type: ignore[assignment]
    model.add(*items)
    return model


async def websocket_turn(user: Any, chain: str, message: str) -> list[dict[str, Any]]:
    """The frames of one turn on a new socket, up to its final frame."""
    socket = await open_socket(user, chain)
    try:
        await socket.send_json_to({"type": "message", "message": message})
        return await frames_until_end(socket)
    finally:
        await socket.disconnect()


def check_tools(tools: list[dict[str, Any]]) -> None:
    """The two calls of ``TOOL_ROUND``: the calculator ran, the made-up tool failed."""
    assert [(t["id"], t["name"], t["ok"]) for t in tools] == [
        ("call_1", "calculator", True),
        ("call_2", "no_such_tool", False),
    ]
    assert json.loads(tools[0]["arguments"]) == {"expression": "6 * 7"}
    assert tools[0]["error"] is None and tools[1]["error"].startswith("No ToolCallback found")
    assert all(isinstance(t["duration_ms"], float) for t in tools)


def check_stored(message_id: int, outcome: dict[str, Any]) -> None:
    """The stored reply keeps what the live outcome said."""
    reply = ChatMessage.objects.get(pk=message_id)
    for key in ("trace_id", "version", "sources", "tools", "timings", "usage", "finish_reason"):
        if outcome.get(key):
            assert reply.metadata[key] == outcome[key], key


# -- the service --------------------------------------------------------------------------------


async def test_a_streamed_tool_round_is_announced_before_the_answer(
    tools_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)("tools", TOOL_ROUND, ["The answer ", "is 42."])
    stream = await stream_turn("tools", alice, "What is 6 * 7?")
    events = [event async for event in stream]
    assert [e.type for e in events] == [
        *("start", "tool_call", "tool_call", "tool_result", "tool_result"),
        *("delta", "delta", "done"),
    ]
    calls = [e.to_dict() for e in events[1:3]]
    assert [(c["id"], c["name"]) for c in calls] == [
        ("call_1", "calculator"),
        ("call_2", "no_such_tool"),
    ]
    done = events[-1].to_dict()
    check_tools(done["tools"])
    assert {e.id: e.ok for e in events[3:5]} == {"call_1": True, "call_2": False}
    await sync_to_async(check_stored)(done["message_id"], done)


async def test_a_called_tool_round_is_in_the_outcome_and_the_stored_reply(
    tools_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)("tools", TOOL_ROUND, "It is 42.")
    outcome = await call_turn("tools", alice, "What is 6 * 7?")
    check_tools(outcome.tools)
    assert outcome.to_dict()["tools"] == outcome.tools
    assert outcome.timings["time_to_first_token_ms"] is None
    await sync_to_async(check_stored)(outcome.message_id, outcome.to_dict())


async def test_retrieval_sends_its_sources_before_the_first_delta(
    rag_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)("rag", ["Five ", "days."])
    stream = await stream_turn("rag", alice, "How long do refunds take?")
    events = [event async for event in stream]
    assert [e.type for e in events] == ["start", "sources", "delta", "delta", "done"]
    [source] = events[1].to_dict()["sources"]
    assert (source["title"], source["source"], source["snippet"]) == (
        "policy.md",
        "policy.md",
        "Refunds take 5 days.",
    )
    assert source["document_id"] and isinstance(source["score"], float)
    # How the search found it: a vector-only collection ranks by one leg.
    assert source["retrieval"]["mode"] == "vector" and source["retrieval"]["vector_rank"] == 1
    done = events[-1].to_dict()
    assert done["sources"] == [source]
    await sync_to_async(check_stored)(done["message_id"], done)


async def test_a_turn_cut_short_keeps_the_sources_it_sent(rag_chain: Any, alice: Any) -> None:
    """Before: the sources were read from the response's metadata, which a stream gets only
    with its last chunk, so a cancelled turn's done and stored reply had none."""
    await sync_to_async(script)("rag", ["Five ", "days ", "later."])
    stream = await stream_turn("rag", alice, "How long do refunds take?")
    events = [await anext(stream) for _ in range(3)]
    assert [e.type for e in events] == ["start", "sources", "delta"]
    await stream.aclose()  # the client left
    done = stream.final_event.to_dict()
    assert (done["reason"], done["finish_reason"]) == ("cancelled", "cancelled")
    assert done["finish_category"] == "cancelled"
    assert done["sources"] == events[1].to_dict()["sources"]
    await sync_to_async(check_stored)(done["message_id"], done)


@pytest.fixture
def empty_rag_chain() -> Any:
    Collection.objects.create(slug="empty", name="Nothing in it")
    return make_chain(
        "empty-rag",
        model=scripted_model("empty-rag-model", responses=(), repeat=False),
        advisors=(("question_answer", {"collection": "empty", "top_k": 3}),),
    )


async def test_retrieval_that_found_nothing_says_so_on_every_transport(
    empty_rag_chain: Any, alice: Any
) -> None:
    """``sources`` comes whenever retrieval ran (before: only when it found something, so a
    client could not tell "nothing found" from "no retrieval")."""
    await sync_to_async(script)("empty-rag", ["No ", "idea."], ["Still ", "none."])
    stream = await stream_turn("empty-rag", alice, "Anything?")
    events = [event.to_dict() for event in [e async for e in stream]]
    assert [e["type"] for e in events] == ["start", "sources", "delta", "delta", "done"]
    assert events[1]["sources"] == [] and events[-1]["sources"] == []
    frames = await websocket_turn(alice, "empty-rag", "Anything?")
    assert [f["type"] for f in frames][:3] == ["start", "sources", "delta"]
    assert frames[1]["sources"] == []


def test_sse_says_retrieval_found_nothing(empty_rag_chain: Any, alice: Any) -> None:
    script("empty-rag", ["No ", "idea."])
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post("/api/chains/empty-rag/stream/", {"message": "?"}, format="json")
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events][:3] == ["start", "sources", "delta"]
    assert events[1][1]["sources"] == []


async def test_sources_come_before_the_tool_rounds(alice: Any) -> None:
    def rows() -> None:
        collection = Collection.objects.create(slug="kb", name="KB")
        ingest_text(collection, "policy.md", "Refunds take 5 days.")
        make_chain(
            "rag-tools",
            model=scripted_model("rag-tools-model", responses=(), repeat=False),
            advisors=(
                ("question_answer", {"collection": "kb", "top_k": 3}),
                ("tool_calling", {}),
            ),
            tools=["calculator"],
        )
        script("rag-tools", TOOL_ROUND, ["Five ", "days."])

    await sync_to_async(rows)()
    stream = await stream_turn("rag-tools", alice, "How long do refunds take?")
    kinds = [event.type async for event in stream]
    assert kinds[:3] == ["start", "sources", "tool_call"]
    assert kinds.count("sources") == 1 and kinds[-1] == "done"


def test_a_reopened_conversation_shows_sources_timings_and_usage_over_the_api(
    rag_chain: Any, alice: Any
) -> None:
    script("rag", "Five days.")
    api = APIClient()
    api.force_authenticate(alice)
    body = api.post("/api/chains/rag/call/", {"message": "Refunds?"}, format="json").json()
    reopened = api.get(f"/api/conversations/{body['conversation_id']}/").json()
    reply = reopened["messages"][-1]
    assert reply["id"] == body["message_id"]
    for key in ("sources", "timings", "version", "trace_id", "finish_reason"):
        assert reply["metadata"][key] == body[key], key
    assert reply["metadata"]["sources"][0]["title"] == "policy.md"


# -- SSE and websocket ----------------------------------------------------------------------------


def test_sse_sends_the_tool_round_in_order(tools_chain: Any, alice: Any) -> None:
    script("tools", TOOL_ROUND, ["The answer ", "is 42."])
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post("/api/chains/tools/stream/", {"message": "6 * 7?"}, format="json")
    events = parse_sse(read_stream(response))
    kinds = [kind for kind, _ in events]
    assert kinds[0] == "start" and kinds[-1] == "done"
    assert kinds[1:5] == ["tool_call", "tool_call", "tool_result", "tool_result"]
    assert set(kinds[5:-1]) == {"delta"}
    check_tools(events[-1][1]["tools"])
    check_stored(events[-1][1]["message_id"], events[-1][1])


async def test_the_websocket_sends_the_tool_round_in_order(tools_chain: Any, alice: Any) -> None:
    await sync_to_async(script)("tools", TOOL_ROUND, ["The answer ", "is 42."])
    frames = await websocket_turn(alice, "tools", "6 * 7?")
    kinds = [frame["type"] for frame in frames]
    assert kinds[:5] == ["start", "tool_call", "tool_call", "tool_result", "tool_result"]
    assert set(kinds[5:-1]) == {"delta"} and kinds[-1] == "done"
    assert frames[1] == {
        "type": "tool_call",
        "id": "call_1",
        "name": "calculator",
        "arguments": '{"expression": "6 * 7"}',
        "event_id": f"{frames[0]['trace_id']}-2",  # "id" stays the tool call's (issue 23)
    }
    check_tools(frames[-1]["tools"])
    await sync_to_async(check_stored)(frames[-1]["message_id"], frames[-1])


# -- one input type -------------------------------------------------------------------------------


def test_turn_input_refuses_what_is_not_an_object() -> None:
    with pytest.raises(TurnError) as refused:
        TurnInput.from_data([])
    assert refused.value.errors == {"non_field_errors": ["Send a JSON object."]}


KNOWN = "Unknown field. Known fields: message, decisions, conversation_id, params, label, version."


@pytest.mark.parametrize(
    ("data", "alias", "errors"),
    [
        ({}, False, {"message": ["This field is required."]}),
        (
            {"conversation_id": 5, "colour": 1},
            False,
            {
                "message": ["This field is required."],
                "colour": [KNOWN],
                "conversation_id": ["Not a valid string."],
            },
        ),
        ({"text": "hi"}, False, {"text": [KNOWN], "message": ["This field is required."]}),
        (
            {"message": "a", "text": "a"},
            True,
            {"message": ["Send the message as message or as text (its alias), not both."]},
        ),
        (
            {"text": " ", "version": 0},
            True,
            {
                "text": ["This field may not be blank."],
                "version": ['Enter a version number (1, 2, ...) or "draft".'],
            },
        ),
    ],
)
def test_turn_input_reports_every_field_error_at_once(
    data: dict[str, Any], alias: bool, errors: dict[str, Any]
) -> None:
    found = TurnInput.from_data(data, alias=alias).errors()
    assert {k: v for k, v in found.items() if k != "conversation_id"} == {
        k: v for k, v in errors.items() if k != "conversation_id"
    }
    assert ("conversation_id" in found) == ("conversation_id" in errors)
    assert TurnInput.from_data({"message": "hi", "version": "draft"}).errors() == {}


def test_rest_reports_every_error_at_once_and_takes_no_alias(tools_chain: Any, alice: Any) -> None:
    api = APIClient()
    api.force_authenticate(alice)
    for url in ("/api/chains/tools/call/", "/api/chains/tools/stream/"):
        body = {"text": "hi", "conversation_id": 5, "params": {"colour": 1}}
        error = api.post(url, body, format="json").json()["error"]
        assert set(error["fields"]) == {"text", "message", "conversation_id", "params.colour"}
    assert not ChatMessage.objects.exists()


def test_a_failed_rest_call_names_its_conversation_and_trace(tools_chain: Any, alice: Any) -> None:
    script("tools", "first answer", RateLimitedError("slow down", status=429))
    api = APIClient()
    api.force_authenticate(alice)
    first = api.post("/api/chains/tools/call/", {"message": "hi"}, format="json").json()
    body = {"message": "again", "conversation_id": first["conversation_id"]}
    failed = api.post("/api/chains/tools/call/", body, format="json")
    assert failed.status_code == 429
    error = failed.json()["error"]
    assert error["conversation_id"] == first["conversation_id"]
    assert error["trace_id"] == CallLog.objects.get(status="error").trace_id


# -- a chain that cannot run ----------------------------------------------------------------------


@pytest.mark.parametrize("staff", [False, True])
def test_a_misconfigured_chain_tells_only_staff_why(
    tools_chain: Any, alice: Any, staff: bool, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    def broken(target: Any) -> Any:
        raise ChainConfigurationError("advisor #2 (tool_calling): secret table missing")

    monkeypatch.setattr("advisors_app.turn.open.compiled_chain", broken)
    alice.is_staff = staff
    alice.save()
    api = APIClient()
    api.force_authenticate(alice)
    response = api.post("/api/chains/tools/call/", {"message": "hi"}, format="json")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "chain_misconfigured"
    assert ("secret table missing" in error["message"]) is staff
    trace_id = error["message"].split("(trace ")[1].split(")")[0]
    assert error["trace_id"] == trace_id
    assert f"trace {trace_id}" in caplog.text and "secret table missing" in caplog.text


@pytest.mark.parametrize("memory", [False, True], ids=["service", "memory-advisor"])
async def test_a_refused_first_turn_stores_nothing_with_or_without_memory(
    alice: Any, memory: bool
) -> None:
    advisors: tuple[Any, ...] = (("safe_guard", {"words": ["keylogger"]}),)
    if memory:
        advisors += (("message_chat_memory", {"max_messages": 10}),)
    await sync_to_async(make_chain)(
        "guarded", model=await sync_to_async(scripted_model)("guarded-model"), advisors=advisors
    )
    outcome = await call_turn("guarded", alice, "write me a keylogger")
    assert (outcome.stored, outcome.message_id, outcome.conversation_id) == (False, None, None)
    stream = await stream_turn("guarded", alice, "a keylogger, please")
    done = [event async for event in stream][-1]
    assert (done.stored, done.conversation_id) == (False, None)
    assert not await ChatMessage.objects.aexists()


async def test_a_stopped_reply_says_what_the_stored_one_says(tools_chain: Any, alice: Any) -> None:
    await sync_to_async(script)("tools", ["one ", "two ", "three"])
    stream = await stream_turn("tools", alice, "count")
    async for event in stream:
        if event.type == "delta":
            break
    await stream.aclose()
    done = stream.final_event
    assert done is not None and done.to_dict()["finish_reason"] == "cancelled"
    reply = await ChatMessage.objects.aget(pk=done.message_id)
    assert reply.text == done.to_dict()["content"] == "one "
    assert (reply.metadata["interrupted"], reply.metadata["finish_reason"]) == (True, "cancelled")
