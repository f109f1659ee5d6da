"""Tracing observers: OpenTelemetry span nesting (calls and streams), the per-call trace."""

from __future__ import annotations

import contextlib
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from advisors_app.core import (
    BaseAdvisor,
    CallAdvisor,
    ChatClient,
    ChatOptions,
    ChatResponse,
    ProviderUnavailableError,
    RecordingAdvisor,
    ScriptedChatModel,
    StreamAdvisor,
    Usage,
)
from advisors_app.core.advisors import SafeGuardAdvisor
from advisors_app.core.attributes import TOOL_CALLING_AUTO_REGISTER
from advisors_app.core.streams import closing_stream
from advisors_app.core.tracing import (
    CallTrace,
    CompositeObserver,
    OpenTelemetryObserver,
    contextual_name,
)

MODES = ["call", "stream"]


def untooled_client(*args, **kwargs):
    """A client without the auto-registered tool loop, so spans are only the test's advisors."""
    return ChatClient(*args, default_advisor_params={TOOL_CALLING_AUTO_REGISTER: False}, **kwargs)


@pytest.fixture
def exporter():
    return InMemorySpanExporter()


@pytest.fixture
def otel(exporter):
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return OpenTelemetryObserver(tracer_provider=provider)


async def execute(mode, client, text="hi"):
    spec = client.prompt(text).options(ChatOptions(model="m-1"))
    if mode == "call":
        return await spec.call().achat_client_response()
    return [c async for c in spec.stream().chat_client_responses()]


class Twice(CallAdvisor, StreamAdvisor):
    """Runs the rest of the chain twice, as a tool loop or a retry does."""

    name = "LoopAdvisor"
    order = 1

    async def advise_call(self, request, chain):
        await chain.next_call(request)
        return await chain.next_call(request)

    async def advise_stream(self, request, chain):
        for _ in range(2):
            async with closing_stream(chain.next_stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk


def test_contextual_names_follow_spring():
    assert contextual_name("MyName") == "my_name"
    assert contextual_name("SafeGuardAdvisor") == "safe_guard"
    assert contextual_name("Structured Output Validation Advisor") == "structured_output_validation"
    assert contextual_name("call") == "call"


@pytest.mark.parametrize("mode", MODES)
async def test_model_span_nests_under_the_advisor_spans(mode, otel, exporter):
    model = ScriptedChatModel([ChatResponse.of_text("ok", usage=Usage(3, 1))] * 2)
    client = untooled_client(
        model,
        default_advisors=[SafeGuardAdvisor(["bomb"]), Twice(), RecordingAdvisor("Inner", 5)],
        observer=otel,
    )
    await execute(mode, client)
    spans = {s.context.span_id: s for s in exporter.get_finished_spans()}
    by_name: dict[str, list] = {}
    for span in spans.values():
        by_name.setdefault(span.name, []).append(span)
    assert sorted(by_name) == ["chat m-1", "inner", "loop", "safe_guard"]
    (guard,), (loop,) = by_name["safe_guard"], by_name["loop"]
    assert guard.parent is None
    assert loop.parent.span_id == guard.context.span_id
    assert len(by_name["inner"]) == 2 and len(by_name["chat m-1"]) == 2
    for inner, chat in zip(by_name["inner"], by_name["chat m-1"], strict=True):
        assert inner.parent.span_id == loop.context.span_id
        assert chat.parent.span_id == inner.context.span_id
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.usage.input_tokens"] == 3
    assert guard.attributes["advisors_app.advisor.name"] == "SafeGuardAdvisor"
    assert guard.attributes["advisors_app.advisor.order"] == 0
    assert guard.attributes["gen_ai.operation.name"] == "framework"
    assert guard.attributes["advisors_app.advisor.mode"] == mode
    assert len({s.context.trace_id for s in spans.values()}) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_errors_are_recorded_and_propagate_unchanged(mode, otel, exporter):
    client = untooled_client(
        ScriptedChatModel([ProviderUnavailableError("down", status=503)]),
        default_advisors=[RecordingAdvisor("Outer")],
        observer=otel,
    )
    with pytest.raises(ProviderUnavailableError):
        await execute(mode, client)
    spans = exporter.get_finished_spans()
    assert len(spans) == 2
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)
    assert any(e.name == "exception" for e in spans[0].events)


async def test_stream_spans_end_when_the_consumer_stops(otel, exporter):
    client = untooled_client(
        ScriptedChatModel([["a", "b", "c"]]),
        default_advisors=[RecordingAdvisor("Outer")],
        observer=otel,
    )
    async with contextlib.aclosing(client.prompt("hi").stream().content()) as texts:
        async for _ in texts:
            assert exporter.get_finished_spans() == ()
            break
    spans = exporter.get_finished_spans()
    assert {s.name for s in spans} == {"outer", "chat"}
    assert all(s.attributes.get("advisors_app.stream.cancelled") for s in spans)


class Rewrite(BaseAdvisor):
    order = 1

    def before(self, request, chain):
        return request.mutate(prompt=request.prompt.augment_user_message("rewritten"))


@pytest.mark.parametrize("mode", MODES)
async def test_call_trace_records_each_invocation(mode):
    trace = CallTrace()
    model = ScriptedChatModel(
        [
            [
                ChatResponse.of_text("o", finish_reason=None),
                ChatResponse.of_text("k", usage=Usage(2, 2)),
            ]
        ]
    )
    client = untooled_client(
        model, default_advisors=[RecordingAdvisor("Outer"), Rewrite()], observer=trace
    )
    await execute(mode, client, "original")
    data = json.loads(json.dumps(trace.to_dict()))
    outer, rewrite, model_entry = data["entries"]
    assert [e["name"] for e in data["entries"]] == ["Outer", "Rewrite", mode]
    assert (outer["parent"], rewrite["parent"], model_entry["parent"]) == (None, 0, 1)
    assert rewrite["request"]["prompt"]["messages"][-1]["text"] == "original"
    assert model_entry["request"]["prompt"]["messages"][-1]["text"] == "rewritten"
    assert outer["response"]["chat_response"]["results"][0]["output"]["text"] == "ok"
    assert outer["usage"] == {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    assert all(e["status"] == "ok" for e in data["entries"])
    assert outer["duration"] >= rewrite["duration"] >= model_entry["duration"] >= 0
    assert outer["self_duration"] == pytest.approx(outer["duration"] - rewrite["duration"])
    assert data["duration"] == pytest.approx(outer["duration"])
    if mode == "stream":
        assert model_entry["chunks"] == 2 and model_entry["first_chunk"] is not None


async def test_call_trace_marks_errors_and_cancelled_streams():
    trace = CallTrace(capture_payloads=False)
    client = untooled_client(
        ScriptedChatModel([ValueError("bad")]), default_advisors=[RecordingAdvisor("A")]
    )
    with pytest.raises(ValueError):
        await client.prompt("x").observer(trace).call().achat_client_response()
    assert [(e.status, e.error) for e in trace.entries] == [("error", "ValueError: bad")] * 2
    assert trace.entries[0].request is None
    trace = CallTrace()
    client = untooled_client(
        ScriptedChatModel([["a", "b"]]), default_advisors=[RecordingAdvisor("A")]
    )
    async with contextlib.aclosing(client.prompt("x").observer(trace).stream().content()) as texts:
        async for _ in texts:
            break
    assert [e.status for e in trace.entries] == ["cancelled", "cancelled"]


async def test_composite_observer_feeds_every_observer(otel, exporter):
    trace = CallTrace()
    client = untooled_client(
        ScriptedChatModel(["ok"]),
        default_advisors=[RecordingAdvisor("A")],
        observer=CompositeObserver(otel, trace),
    )
    assert (await client.prompt("x").call().acontent()) == "ok"
    assert [s.name for s in exporter.get_finished_spans()] == ["chat", "a"]
    assert [e.name for e in trace.entries] == ["A", "call"]


async def test_without_an_sdk_the_api_is_a_no_op():
    client = untooled_client(ScriptedChatModel(["ok"]), observer=OpenTelemetryObserver())
    assert (await client.prompt("x").call().acontent()) == "ok"


async def test_a_stream_trace_without_payloads_keeps_times_and_counts_only() -> None:
    trace = CallTrace(capture_payloads=False)
    client = untooled_client(
        ScriptedChatModel([["a", "b", "c"]]), default_advisors=[RecordingAdvisor("A")]
    )
    assert [t async for t in client.prompt("x").observer(trace).stream().content()] == [
        "a",
        "b",
        "c",
    ]
    for entry in trace.entries:
        assert (entry.status, entry.chunks, entry.request, entry.response) == ("ok", 3, None, None)
        assert entry.first_chunk is not None and entry.duration is not None
