"""OpenTelemetry export over every transport: a turn asked for by the REST call, the SSE
stream or the websocket is exported once, as the same spans (``advisors_app.telemetry``, read
back through the SDK's in-memory exporter), its mode on the turn span."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from advisors_app.core import Usage
from advisors_app.core.testing import tool_call_response
from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.models import CallLog
from advisors_app.telemetry import export
from advisors_app.turn import stages
from tests.api.views.test_budget_transports import parse_sse, read_stream, turn_frames
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)

ASK = "What is 6 * 7?"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    export.set_processor(SimpleSpanProcessor(exporter))
    stages.add_hook(stages.Stage.AFTER_COMMIT, export.export_turn)
    clear_cache()
    yield exporter
    stages.remove_hook(stages.Stage.AFTER_COMMIT, export.export_turn)
    export.shutdown()
    clear_cache()


@pytest.fixture
def chain(spans: InMemorySpanExporter) -> Any:
    """``support``: asks for the calculator once, then answers."""
    model = scripted_model("calc", responses=(), repeat=False)
    chain = make_chain(advisors=(("tool_calling", {}),), model=model, tools=["calculator"])
    round_ = tool_call_response(("calculator", {"expression": "6 * 7"}), usage=Usage(50, 10))
    load_chain(chain.slug).client.chat_model.add(round_, "It is 42.")
    return chain


def assert_exported(exporter: InMemorySpanExporter, mode: str) -> None:
    finished: tuple[ReadableSpan, ...] = exporter.get_finished_spans()
    names = [span.name for span in finished]
    assert names.count("invoke_agent support") == 1
    assert names.count("chat calc") == 2
    assert names.count("execute_tool calculator") == 1
    [root] = [span for span in finished if span.parent is None]
    attrs = root.attributes or {}
    assert attrs["advisors_app.mode"] == mode
    assert attrs["advisors_app.trace_id"] == CallLog.objects.get().trace_id
    for span in finished:
        assert all(ASK not in str(value) for value in (span.attributes or {}).values())


def test_rest_call(chain: Any, api: Any, spans: InMemorySpanExporter) -> None:
    response = api.post("/api/chains/support/call/", {"message": ASK}, format="json")
    assert response.status_code == 200, response.content
    assert_exported(spans, "call")


def test_sse_stream(chain: Any, api: Any, spans: InMemorySpanExporter) -> None:
    response = api.post("/api/chains/support/stream/", {"message": ASK}, format="json")
    assert response.status_code == 200
    events = parse_sse(read_stream(response))
    assert events[-1][0] == "done"
    assert_exported(spans, "stream")


async def test_websocket(chain: Any, alice: Any, spans: InMemorySpanExporter) -> None:
    frames = await turn_frames(alice, {"type": "message", "message": ASK})
    assert frames[-1]["type"] == "done"
    await sync_to_async(assert_exported)(spans, "stream")
