"""OpenTelemetry export of turns (``advisors_app.telemetry``), read back through the SDK's
in-memory exporter: a span per turn, advisor, model call and tool call, parented, timed, with
the GenAI semantic conventions' attributes, the cost and the chain version — in calls and in
streams — and no message text in any attribute. Also the setting's system check (E015)."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.test import override_settings
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from advisors_app.checks import check_settings
from advisors_app.core import Usage
from advisors_app.core.testing import tool_call_response
from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.integration import call_chain, stream_chain
from advisors_app.models import AdvisorChain, CallLog, ModelPrice
from advisors_app.telemetry import export
from advisors_app.turn import stages
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_TEXT = "my-private-question-7f3a"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    export.set_processor(SimpleSpanProcessor(exporter), {"endpoint": "http://unused:4318"})
    stages.add_hook(stages.Stage.AFTER_COMMIT, export.export_turn)
    clear_cache()
    yield exporter
    stages.remove_hook(stages.Stage.AFTER_COMMIT, export.export_turn)
    export.shutdown()
    clear_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def tool_chain() -> AdvisorChain:
    """``tools``: a priced scripted model asking for the calculator once, then answering."""
    model = scripted_model("calc-model", responses=(), repeat=False)
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    chain = make_chain("tools", model=model, advisors=(("tool_calling", {}),), tools=["calculator"])
    round_ = tool_call_response(("calculator", {"expression": "6 * 7"}), usage=Usage(50, 10))
    load_chain(chain.slug).client.chat_model.add(round_, "It is 42.")
    return chain


def _by_name(finished: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in finished:
        found.setdefault(span.name, []).append(span)
    return found


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[str]:
    names = []
    while span.parent is not None:
        span = by_id[span.parent.span_id]
        names.append(span.name)
    return names


def _check_turn(exporter: InMemorySpanExporter, mode: str) -> dict[str, list[ReadableSpan]]:
    finished = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in finished}
    names = _by_name(finished)
    [root] = names["invoke_agent tools"]
    assert root.parent is None
    assert len({span.context.trace_id for span in finished}) == 1
    log = CallLog.objects.get()
    attrs = root.attributes or {}
    assert attrs["gen_ai.operation.name"] == "invoke_agent"
    assert attrs["gen_ai.agent.name"] == "tools"
    assert attrs["advisors_app.chain.version"] == 1
    assert attrs["advisors_app.trace_id"] == log.trace_id
    assert attrs["advisors_app.call_log.id"] == log.pk
    assert attrs["advisors_app.mode"] == mode
    assert attrs["advisors_app.status"] == "ok"
    assert Decimal(str(attrs["advisors_app.cost.total"])) == log.total_cost

    chats = names["chat calc-model"]
    assert len(chats) == 2  # the tool round and the answer
    first, last = sorted(chats, key=lambda s: s.start_time or 0)
    for chat in chats:
        chat_attrs = chat.attributes or {}
        assert chat_attrs["gen_ai.operation.name"] == "chat"
        assert chat_attrs["gen_ai.request.model"] == "calc-model"
        assert chat_attrs["gen_ai.response.model"]
        assert chat_attrs["gen_ai.provider.name"] == chat_attrs["gen_ai.system"] == "scripted"
        assert chat_attrs["advisors_app.cost.currency"]
        # Under an advisor of the turn (the model advisor running it).
        ancestors = _ancestors(chat, by_id)
        assert ancestors[-1] == "invoke_agent tools" and ancestors[0].startswith("advisor ")
    assert (first.attributes or {})["gen_ai.usage.input_tokens"] == 50
    assert (first.attributes or {})["gen_ai.usage.output_tokens"] == 10
    assert "gen_ai.response.finish_reasons" not in (first.attributes or {})
    assert (last.attributes or {})["gen_ai.response.finish_reasons"] == (log.finish_reason,)

    [tool] = names["execute_tool calculator"]
    tool_attrs = tool.attributes or {}
    assert tool_attrs["gen_ai.operation.name"] == "execute_tool"
    assert tool_attrs["gen_ai.tool.name"] == "calculator"
    assert tool_attrs["gen_ai.tool.call.id"]
    assert _ancestors(tool, by_id)[-1] == "invoke_agent tools"
    # Between the two model calls, which it answers.
    assert (first.end_time or 0) <= (tool.start_time or 0) <= (last.start_time or 0)

    advisors = [s for s in finished if s.name.startswith("advisor ")]
    assert len(advisors) == len(log.trace["entries"])
    for span in (*advisors, *chats, tool):
        parent = by_id.get(span.parent.span_id) if span.parent else None
        assert parent is not None  # everything under the turn
        # Inside the parent's time (explicit times from the one recorded trace).
        assert (parent.start_time or 0) <= (span.start_time or 0)
        assert (span.end_time or 0) <= (parent.end_time or 0)
    for span in finished:
        for value in (span.attributes or {}).values():
            assert SECRET_TEXT not in str(value)
            assert "6 * 7" not in str(value)  # no tool argument
    return names


def test_a_called_turn_is_exported_as_nested_genai_spans(
    spans: InMemorySpanExporter, tool_chain: AdvisorChain, user: Any
) -> None:
    outcome = call_chain("tools", user, f"What is 6 * 7? {SECRET_TEXT}")
    assert outcome.content == "It is 42."
    names = _check_turn(spans, "call")
    [tool] = names["execute_tool calculator"]
    assert (tool.attributes or {})["gen_ai.tool.call.id"] == outcome.tools[0]["id"]


def test_a_streamed_turn_is_exported_with_its_chunks(
    spans: InMemorySpanExporter, tool_chain: AdvisorChain, user: Any
) -> None:
    events = list(stream_chain("tools", user, f"What is 6 * 7? {SECRET_TEXT}"))
    assert events[-1].type == "done"
    names = _check_turn(spans, "stream")
    streamed = [
        s for s in spans.get_finished_spans() if s.name.startswith("advisor ") and s.attributes
    ]
    assert any((s.attributes or {}).get("advisors_app.stream.chunks") for s in streamed)
    assert names["invoke_agent tools"][0].resource.attributes["service.name"]


def test_nothing_is_exported_without_the_hook(tool_chain: AdvisorChain, user: Any) -> None:
    """Off (the default): the app adds no hook and builds no provider."""
    assert export.export_turn not in stages.hooks(stages.Stage.AFTER_COMMIT)
    assert export.provider() is None
    call_chain("tools", user, "What is 6 * 7?")


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("yes", "must be a bool or a dict"),
        ({}, 'needs an "endpoint"'),
        ({"endpoint": "127.0.0.1:4318"}, "must be an http(s) URL"),
        ({"endpoint": "http://x:4318", "colour": 1}, "unknown field 'colour'"),
        ({"endpoint": "http://x:4318", "timeout": 0}, '"timeout" must be above 0'),
        ({"endpoint": "http://x:4318", "headers": {"authorization": 5}}, "map strings"),
        ({"endpoint": "http://x:4318", "service_name": True}, "wrong type"),
    ],
)
def test_a_bad_setting_is_error_e015_without_showing_values(value: Any, problem: str) -> None:
    with override_settings(ADVISORS={"OPENTELEMETRY": value}):
        errors = check_settings(None)
    assert [e.id for e in errors] == ["advisors_app.E015"]
    assert problem in errors[0].msg


@pytest.mark.parametrize(
    "value",
    [
        False,
        True,
        {"endpoint": "http://127.0.0.1:4318"},
        {
            "endpoint": "https://tempo.example:4318/v1/traces",
            "service_name": "advisors",
            "headers": {"authorization": "Bearer s3cret"},
            "timeout": 5,
        },
    ],
)
def test_good_settings_pass(value: Any) -> None:
    with override_settings(ADVISORS={"OPENTELEMETRY": value}):
        assert check_settings(None) == []


def test_a_secret_header_is_never_shown_by_the_check() -> None:
    value = {"endpoint": "ftp://x", "headers": {"authorization": 5, "x-key": "s3cret"}}
    with override_settings(ADVISORS={"OPENTELEMETRY": value}):
        errors = check_settings(None)
    assert errors and all("s3cret" not in e.msg + str(e.hint) for e in errors)


def test_a_failed_turn_is_an_error_span_naming_the_error_type_only(
    spans: InMemorySpanExporter, user: Any
) -> None:
    make_chain("broken", model=scripted_model("broken-model", responses=(), repeat=False))
    load_chain("broken").client.chat_model.add(RuntimeError(f"upstream said {SECRET_TEXT}"))
    with pytest.raises(Exception):  # noqa: B017 (how the failure surfaces is not the point)
        call_chain("broken", user, "Hi")

    finished = spans.get_finished_spans()
    [root] = [span for span in finished if span.parent is None]
    assert root.status.status_code is StatusCode.ERROR
    assert (root.attributes or {})["error.type"] == CallLog.objects.get().error_type
    failed = [s for s in finished if s.name.startswith("advisor ")]
    assert failed and all(s.status.status_code is StatusCode.ERROR for s in failed)
    assert {(s.attributes or {})["error.type"] for s in failed} == {"RuntimeError"}
    for span in finished:
        assert all(SECRET_TEXT not in str(v) for v in (span.attributes or {}).values())
        assert SECRET_TEXT not in str(span.status.description)
