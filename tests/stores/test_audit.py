"""DjangoAuditSink on the embedded PostgreSQL: one AuditEntry per call, stream or interruption."""

from __future__ import annotations

import contextlib

import pytest

from advisors_app.core import CONVERSATION_ID, ChatClient, ScriptedChatModel
from advisors_app.core.advisors import AuditAdvisor, SafeGuardAdvisor
from advisors_app.models import AuditEntry
from advisors_app.stores.audit import DjangoAuditSink

pytestmark = pytest.mark.django_db(transaction=True)


async def entries() -> list[AuditEntry]:
    return [entry async for entry in AuditEntry.objects.order_by("id")]


def client_of(*script):
    advisors = [AuditAdvisor(DjangoAuditSink()), SafeGuardAdvisor(["bomb"])]
    return ChatClient(ScriptedChatModel(list(script)), default_advisors=advisors)


async def test_call_and_stream_are_stored_once_each():
    client = client_of("Paris", ["Ly", "on"])
    await client.prompt("Capital?").advisor_param(CONVERSATION_ID, "c1").call().acontent()
    texts = [t async for t in client.prompt("Second city?").stream().content()]
    assert texts == ["Ly", "on"]
    call, stream = await entries()
    assert (call.mode, call.status, call.conversation_id, call.response_text) == (
        "call",
        "completed",
        "c1",
        "Paris",
    )
    assert call.prompt == [{"type": "user", "text": "Capital?"}]
    assert (stream.mode, stream.status, stream.response_text) == ("stream", "completed", "Lyon")
    assert stream.conversation_id == ""


async def test_refusal_and_interruption_are_stored():
    client = client_of(["one ", "two ", "three"])
    await client.prompt("a bomb").call().acontent()
    async with contextlib.aclosing(client.prompt("count").stream().content()) as texts:
        async for _ in texts:
            break
    refused, interrupted = await entries()
    assert refused.finish_reason == "CONTENT_FILTER"
    assert refused.context["safeguard_matched"] == ["bomb"]
    assert (interrupted.status, interrupted.response_text) == ("interrupted", "one ")
