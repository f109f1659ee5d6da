"""AuditAdvisor: one record per call or stream: completed, error or interrupted."""

from __future__ import annotations

import contextlib

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    HIGHEST_PRECEDENCE,
    ChatClient,
    ChatResponse,
    ProviderUnavailableError,
    ScriptedChatModel,
    Usage,
)
from advisors_app.core.advisors import AuditAdvisor, SafeGuardAdvisor
from advisors_app.core.advisors.audit import AuditSink, InMemoryAuditSink

from .helpers import run

MODES = ["call", "stream"]


def client_of(*script, extra=()):
    sink = InMemoryAuditSink()
    model = ScriptedChatModel(list(script))
    return ChatClient(model, default_advisors=[AuditAdvisor(sink), *extra]), sink


def test_defaults():
    advisor = AuditAdvisor(InMemoryAuditSink())
    assert advisor.order == HIGHEST_PRECEDENCE + 100
    assert isinstance(InMemoryAuditSink(), AuditSink)


@pytest.mark.parametrize("mode", MODES)
async def test_completed_call_writes_exactly_one_record(mode):
    client, sink = client_of(
        [
            ChatResponse.of_text("Par", finish_reason=None),
            ChatResponse.of_text("is", usage=Usage(4, 2)),
        ]
    )
    await run(mode, client, "Capital?", **{CONVERSATION_ID: "c1"})
    (record,) = sink.records
    assert (record.mode, record.status, record.conversation_id) == (mode, "completed", "c1")
    assert (record.request_text, record.response_text, record.finish_reason) == (
        "Capital?",
        "Paris",
        "STOP",
    )
    assert record.usage == {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6}
    assert record.prompt == [{"type": "user", "text": "Capital?"}]
    assert record.duration >= 0
    assert record.to_dict()["started_at"].endswith("+00:00")


@pytest.mark.parametrize("mode", MODES)
async def test_failed_call_writes_an_error_record_and_keeps_the_error(mode):
    client, sink = client_of(ProviderUnavailableError("down", status=503))
    with pytest.raises(ProviderUnavailableError):
        await run(mode, client, "hi")
    (record,) = sink.records
    assert record.status == "error"
    assert record.error == "ProviderUnavailableError: [503] down"


async def test_interrupted_stream_writes_one_interrupted_record_with_the_partial_text():
    client, sink = client_of(["one ", "two ", "three"])
    async with contextlib.aclosing(client.prompt("count").stream().content()) as texts:
        async for text in texts:
            if text == "two ":
                break
    (record,) = sink.records
    assert (record.status, record.response_text) == ("interrupted", "one two ")


@pytest.mark.parametrize("mode", MODES)
async def test_refusals_are_audited_with_their_reason(mode):
    client, sink = client_of("never", extra=[SafeGuardAdvisor(["bomb"])])
    await run(mode, client, "a bomb")
    (record,) = sink.records
    assert record.finish_reason == "CONTENT_FILTER"
    assert record.context["safeguard_matched"] == ["bomb"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_sink_fails_a_completed_call(mode):
    class BrokenSink:
        async def write(self, record):
            raise OSError("disk full")

    client = ChatClient(ScriptedChatModel(["ok"]), default_advisors=[AuditAdvisor(BrokenSink())])
    with pytest.raises(OSError, match="disk full"):
        await run(mode, client, "hi")
