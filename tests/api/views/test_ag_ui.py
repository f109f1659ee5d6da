"""``POST /api/chains/<slug>/ag-ui/``: the turn as an AG-UI run, every event parsed by the
``ag-ui-protocol`` package's models (no unknown field, the protocol's order)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from ag_ui.core import Event, EventType, RunAgentInput
from django.test import AsyncClient, override_settings
from pydantic import BaseModel, TypeAdapter
from rest_framework.test import APIClient

from advisors_app.core import ProviderUnavailableError, ToolCall
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool
from advisors_app.definition.tools import tool_registry
from advisors_app.models import ChatMessage, Conversation, ToolApproval
from advisors_app.turn.buffer import parse_event_id
from tests.api.conftest import client_for
from tests.api.views.test_chat import read_stream, script
from tests.factories import make_chain, scripted_model
from tests.test_approvals import memo_call, save_memo, saved

pytestmark = pytest.mark.django_db(transaction=True)

EVENTS: TypeAdapter[Any] = TypeAdapter(Event)


@tool(name="order_status")
def order_status(order_id: str) -> str:
    """The status of an order."""
    return f"Order {order_id} shipped."


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


def run_body(text: str | None, thread: str = "thread-1", run: str = "run-1", **extra: Any) -> dict:
    messages = [{"id": "u1", "role": "user", "content": text}] if text is not None else []
    return {"threadId": thread, "runId": run, "messages": messages, **extra}


def check_event(data: str) -> Any:
    """The event of one ``data:`` line, validated by the package's models: the protocol's
    shape, and no field it does not define."""
    event = EVENTS.validate_json(data)

    def no_extra(model: Any) -> None:
        assert not model.model_extra, (type(model).__name__, model.model_extra)
        for value in model.__dict__.values():
            for item in value if isinstance(value, list) else [value]:
                if isinstance(item, BaseModel):
                    no_extra(item)

    no_extra(event)
    # The package's own encoding of the event is what was sent.
    assert json.loads(event.model_dump_json(by_alias=True)) == json.loads(data)
    return event


def parse_ag_ui(body: str) -> list[tuple[str | None, Any]]:
    """``[(SSE id, event)]`` of an AG-UI stream, each event checked (:func:`check_event`)."""
    events = []
    for block in body.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        assert set(fields) <= {"id", "data"}
        events.append((fields.get("id"), check_event(fields["data"])))
    return events


def check_order(events: list[Any]) -> None:
    """The lifecycle AG-UI asks for: one run, opened first and closed last; text messages and
    tool calls started before their content and ended once."""
    types = [event.type for event in events]
    assert types[0] == EventType.RUN_STARTED
    assert types[-1] in (EventType.RUN_FINISHED, EventType.RUN_ERROR)
    assert types.count(EventType.RUN_STARTED) == 1
    open_text: set[str] = set()
    open_calls: set[str] = set()
    for event in events[1:-1]:
        if event.type == EventType.TEXT_MESSAGE_START:
            assert not open_text  # one text message at a time
            open_text.add(event.message_id)
        elif event.type == EventType.TEXT_MESSAGE_CONTENT:
            assert event.message_id in open_text and event.delta
        elif event.type == EventType.TEXT_MESSAGE_END:
            open_text.remove(event.message_id)
        elif event.type == EventType.TOOL_CALL_START:
            assert not open_text
            open_calls.add(event.tool_call_id)
        elif event.type == EventType.TOOL_CALL_ARGS:
            assert event.tool_call_id in open_calls
        elif event.type == EventType.TOOL_CALL_END:
            open_calls.remove(event.tool_call_id)
    assert not open_text and not open_calls


def post(user: Any, slug: str, body: Any, **headers: Any) -> Any:
    return client_for(user).post(f"/api/chains/{slug}/ag-ui/", body, format="json", **headers)


def stream(user: Any, slug: str, body: Any, **headers: Any) -> list[Any]:
    response = post(user, slug, body, **headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    events = [event for _, event in parse_ag_ui(read_stream(response))]
    check_order(events)
    return events


def test_a_text_turn_is_a_run_with_one_text_message(chain: Any, alice: Any) -> None:
    script(chain.slug, ["Hel", "lo!"])
    events = stream(alice, chain.slug, run_body("hi"))
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    started, finished = events[0], events[-1]
    assert (started.thread_id, started.run_id, started.protocol_version) == (
        "thread-1",
        "run-1",
        "1.0",
    )
    assert started.metadata["conversation_id"] == "thread-1"
    assert "".join(e.delta for e in events[2:4]) == "Hello!"
    assert events[1].role == "assistant"
    assert (finished.thread_id, finished.run_id, finished.outcome.type) == (
        "thread-1",
        "run-1",
        "success",
    )
    assert finished.result["stored"] is True and "content" not in finished.result
    # The thread is the conversation: a second run continues it.
    script(chain.slug, "Again.")
    stream(alice, chain.slug, run_body("more", run="run-2"))
    rows = ChatMessage.objects.filter(conversation__conversation_id=f"{alice.pk}:thread-1")
    assert [r.text for r in rows.order_by("sequence")] == ["hi", "Hello!", "more", "Again."]


def test_a_tool_call_turn_sends_the_call_and_its_result(chain: Any, alice: Any) -> None:
    call = ToolCall("c1", "order_status", json.dumps({"order_id": "42"}))
    script(chain.slug, tool_call_response(call), ["It ", "shipped."])
    events = stream(alice, chain.slug, run_body("where is order 42?"))
    types = [e.type for e in events]
    assert types == [
        EventType.RUN_STARTED,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.TOOL_CALL_RESULT,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    start, args, result = events[1], events[2], events[4]
    assert (start.tool_call_id, start.tool_call_name) == ("c1", "order_status")
    assert json.loads(args.delta) == {"order_id": "42"}
    assert result.tool_call_id == "c1" and json.loads(result.content)["ok"] is True
    assert events[-1].result["tools"][0]["name"] == "order_status"


def test_sources_are_a_custom_event(alice: Any) -> None:
    from advisors_app.ingestion.pipeline import ingest_text
    from advisors_app.models import Collection

    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.")
    rag = make_chain(
        "rag",
        model=scripted_model("rag-model", responses=("Five days.",)),
        advisors=(("question_answer", {"collection": "kb"}),),
    )
    events = stream(alice, rag.slug, run_body("How long do refunds take?"))
    [sources] = [e for e in events if e.type == EventType.CUSTOM]
    assert sources.name == "sources" and sources.value[0]["title"] == "policy.md"
    assert events[-1].result["sources"] == sources.value


def test_a_failed_turn_ends_with_run_error(chain: Any, alice: Any) -> None:
    script(chain.slug, ["partial ", ProviderUnavailableError("down", status=503)])
    events = stream(alice, chain.slug, run_body("hi"))
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,  # the open text closed before the run ends
        EventType.RUN_ERROR,
    ]
    assert (events[-1].code, events[-1].message) == ("provider_unavailable", "down")


def test_a_guard_refusal_is_a_finished_run_that_stored_nothing(alice: Any) -> None:
    guarded = make_chain(
        "guarded",
        model=scripted_model("guarded-model", responses=("Sure.",)),
        advisors=(("safe_guard", {"words": ["keylogger"]}), ("message_chat_memory", {})),
    )
    events = stream(alice, guarded.slug, run_body("write a keylogger"))
    finished = events[-1]
    assert finished.outcome.type == "success"
    assert finished.result["stored"] is False and finished.result["conversation_id"] is None
    assert finished.result["finish_reason"] == "CONTENT_FILTER"
    assert not Conversation.objects.exists()


def test_an_approval_pause_is_an_interrupt_the_next_run_resumes(chain: Any, alice: Any) -> None:
    script(chain.slug, memo_call("m1"), ["Saved ", "it."])
    events = stream(alice, chain.slug, run_body("Save a memo: milk"))
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TOOL_CALL_START,
        EventType.TOOL_CALL_ARGS,
        EventType.TOOL_CALL_END,
        EventType.RUN_FINISHED,
    ]
    assert json.loads(events[2].delta) == {"text": "milk"}
    outcome = events[-1].outcome
    assert outcome.type == "interrupt"
    [interrupt] = outcome.interrupts
    assert (interrupt.id, interrupt.reason, interrupt.tool_call_id) == ("m1", "tool_call", "m1")
    assert interrupt.response_schema["required"] == ["approved"]
    assert "editedArgs" in interrupt.response_schema["properties"]
    assert saved == []

    # A resume that does not answer the interrupt is refused with field errors.
    bad = post(alice, chain.slug, run_body(None, run="run-2", resume=[
        {"interruptId": "m1", "status": "resolved", "payload": {"ok": True}}
    ]))  # fmt: skip
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) == {"resume.0.payload"}
    unknown = post(alice, chain.slug, run_body(None, run="run-2", resume=[
        {"interruptId": "nope", "status": "resolved", "payload": {"approved": True}}
    ]))  # fmt: skip
    assert unknown.status_code == 400 and "resume" in unknown.json()["error"]["fields"]

    edit = {"approved": True, "editedArgs": {"text": "oat milk"}}
    resume = [{"interruptId": "m1", "status": "resolved", "payload": edit}]
    events = stream(alice, chain.slug, run_body(None, run="run-2", resume=resume))
    # The resumed run does not propose the call again: it sends its result.
    assert [e.type for e in events] == [
        EventType.RUN_STARTED,
        EventType.TOOL_CALL_RESULT,
        EventType.TEXT_MESSAGE_START,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_CONTENT,
        EventType.TEXT_MESSAGE_END,
        EventType.RUN_FINISHED,
    ]
    assert events[1].tool_call_id == "m1" and events[-1].outcome.type == "success"
    assert saved == [("oat milk", "alice")]
    assert ToolApproval.objects.get().status == "edited"


def test_a_rejected_interrupt_gets_a_result_saying_it_did_not_run(chain: Any, alice: Any) -> None:
    script(chain.slug, memo_call("m1"), "Not saved.")
    stream(alice, chain.slug, run_body("Save a memo: milk"))
    resume = [{"interruptId": "m1", "status": "cancelled"}]
    events = stream(alice, chain.slug, run_body(None, run="run-2", resume=resume))
    assert [e.type for e in events][:2] == [EventType.RUN_STARTED, EventType.TOOL_CALL_RESULT]
    assert events[1].tool_call_id == "m1" and json.loads(events[1].content)["ok"] is False
    assert events[-1].outcome.type == "success"
    assert saved == [] and ToolApproval.objects.get().status == "rejected"


def test_another_users_thread_is_not_theirs(chain: Any, alice: Any, bob: Any) -> None:
    script(chain.slug, "For Alice.", memo_call("m1"), "For Bob.")
    stream(alice, chain.slug, run_body("my secret is 7", thread="shared"))
    stream(alice, chain.slug, run_body("memo", thread="shared", run="run-2"))  # pauses at m1
    # Bob's run on Alice's thread id is his own conversation: nothing of hers reaches it.
    model = script(chain.slug)
    stream(bob, chain.slug, run_body("what is my secret?", thread="shared"))
    assert "secret is 7" not in str(model.prompts[-1].instructions)
    # Nor can he answer her interrupt, nor resume her stream.
    resume = [{"interruptId": "m1", "status": "resolved", "payload": {"approved": True}}]
    refused = post(bob, chain.slug, run_body(None, thread="shared", run="r3", resume=resume))
    assert refused.status_code == 400 and "resume" in refused.json()["error"]["fields"]
    assert ToolApproval.objects.get().status == "pending" and saved == []


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (["hi"], {"non_field_errors"}),
        ({"runId": "r", "messages": []}, {"threadId"}),
        ({"threadId": "t", "runId": "r", "messages": "hi"}, {"messages"}),
        (run_body("   "), {"messages"}),
        (run_body("hi", thread="../x"), {"threadId"}),
        (run_body("hi", run="r" * 300), {"runId"}),
        (run_body("hi", forwardedProps=[1]), {"forwardedProps"}),
        (run_body("hi", forwardedProps={"params": {"options": {"temperature": 9}}}),
         {"forwardedProps.params.options.temperature"}),
        (run_body("hi", forwardedProps={"version": 0}), {"forwardedProps.version"}),
        ({"threadId": "t", "runId": "r", "messages": [
            {"id": "a", "role": "assistant", "content": "hi"}]}, {"messages"}),
        (run_body(None, resume=[{"interruptId": "x", "status": "maybe"}]), {"resume.0.status"}),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_with_field_errors(
    chain: Any, alice: Any, body: Any, fields: set[str]
) -> None:
    response = post(alice, chain.slug, body)
    assert response.status_code == 400, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "invalid" and set(error["fields"]) == fields, error
    assert not Conversation.objects.exists()


def test_auth_and_csrf_are_the_stream_endpoints(chain: Any, alice: Any) -> None:
    script(chain.slug, "Hi.")
    assert client_for(None).post("/api/chains/agent/ag-ui/", run_body("hi"), format="json")\
        .status_code == 401  # fmt: skip
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    refused = browser.post("/api/chains/agent/ag-ui/", run_body("hi"), format="json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]
    assert post(alice, "nope", run_body("hi")).status_code == 404


def test_the_request_shape_is_the_packages(chain: Any, alice: Any) -> None:
    """A body built by the package's own model (as a Python AG-UI client sends it) runs."""
    script(chain.slug, "Hi.")
    body = RunAgentInput(
        thread_id="t-9",
        run_id="r-9",
        protocol_version="1.0",
        messages=[{"id": "u", "role": "user", "content": [{"type": "text", "text": "hi"}]}],
        tools=[],
        context=[],
        forwarded_props={"label": "production"},
    ).model_dump(by_alias=True)
    events = stream(alice, chain.slug, body)
    assert events[-1].outcome.type == "success"


@override_settings(ADVISORS={"DISCONNECT_POLICY": "continue"})
async def test_a_dropped_stream_resumes_with_last_event_id(chain: Any, alice: Any) -> None:
    from tests.test_consumers import script as ascript

    await ascript(chain.slug, [f"w{n} " for n in range(10)], delay=0.03)
    client = AsyncClient()
    await client.aforce_login(alice)
    url = f"/api/chains/{chain.slug}/ag-ui/"
    body = run_body("count")
    response = await client.post(url, body, content_type="application/json")
    assert response.status_code == 200
    text = ""

    async def read() -> None:
        nonlocal text
        async for part in response.streaming_content:
            text += part.decode()

    reader = asyncio.create_task(read())
    while len(parse_ag_ui(text)) < 4:
        await asyncio.sleep(0.005)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    before = parse_ag_ui(text)
    last_id = next(i for i, _ in reversed(before) if i)
    resumed = await client.post(
        url, body, content_type="application/json", headers={"Last-Event-ID": last_id}
    )
    assert resumed.status_code == 200
    after = parse_ag_ui(b"".join([p async for p in resumed.streaming_content]).decode())
    number = parse_event_id(last_id)[1]  # type: ignore[index]
    assert after and all(parse_event_id(i)[1] > number for i, _ in after if i)  # type: ignore[index]
    events = [e for _, e in before] + [e for _, e in after]
    check_order(events)
    deltas = "".join(e.delta for e in events if e.type == EventType.TEXT_MESSAGE_CONTENT)
    assert deltas == "".join(f"w{n} " for n in range(10))
    assert events[-1].type == EventType.RUN_FINISHED
    # Another user has nothing of it to resume.
    other = AsyncClient()
    bob = await _user("bob")
    await other.aforce_login(bob)
    missing = await other.post(
        url, body, content_type="application/json", headers={"Last-Event-ID": last_id}
    )
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


async def _user(name: str) -> Any:
    from asgiref.sync import sync_to_async
    from django.contrib.auth import get_user_model

    return await sync_to_async(get_user_model().objects.create_user)(name, password="pw")
