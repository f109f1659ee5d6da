"""The conversation admin's transcript: each assistant reply shows its turn compactly."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from advisors_app.admin.logs import reply_details
from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.models import Conversation
from advisors_app.stores.memory import DjangoChatMemoryRepository

pytestmark = pytest.mark.django_db

#: A reply's metadata as the turn stores it (``TurnOutcome.reply_metadata``).
METADATA = {
    "trace_id": "t1",
    "version": 2,
    "sources": [
        {"document_id": "7", "title": "Refunds <b>policy</b>", "source": "refunds.md",
         "score": 0.8312, "snippet": "Refunds are paid..."},
        {"document_id": None, "title": "", "source": "bank.md", "score": None, "snippet": ""},
    ],
    "tools": [
        {"id": "c1", "name": "calculator", "arguments": "{}", "ok": True, "error": None,
         "duration_ms": 3.4},
        {"id": "c2", "name": "clock", "arguments": "{}", "ok": False, "error": "boom",
         "duration_ms": 1.0},
    ],
    "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40},
    "finish_reason": "STOP",
    "timings": {"latency_ms": 812.5, "time_to_first_token_ms": 120.25},
}  # fmt: skip
#: Its summary line: version, timings in seconds as the call log shows them, usage.
SUMMARY = "v2 · first token 0.120 s · total 0.812 s · 31 prompt + 9 completion = 40 tokens"


def test_reply_details_are_compact_and_skip_what_an_older_reply_lacks() -> None:
    assert reply_details(METADATA) == {
        "guard": [],
        "summary": SUMMARY,
        "sources": [("Refunds <b>policy</b>", "0.83"), ("bank.md", "")],
        "tools": [("calculator", "ok (3 ms)"), ("clock", "failed: boom (1 ms)")],
    }
    draft_call = {"version": None, "timings": {"latency_ms": 50.0, "time_to_first_token_ms": None}}
    assert reply_details(draft_call)["summary"] == "draft · total 0.050 s"
    assert reply_details({"usage": {"total_tokens": 12}})["summary"] == "12 tokens"
    assert reply_details({"trace_id": "old"}) == {
        "summary": "",
        "sources": [],
        "tools": [],
        "guard": [],
    }
    assert reply_details(None) == {"summary": "", "sources": [], "tools": [], "guard": []}


def test_the_transcript_shows_sources_usage_timings_and_version_of_replies(
    admin_client: Client, django_user_model: Any
) -> None:
    owner = django_user_model.objects.create_user("alice", password="pw")
    conversation = Conversation.objects.create(conversation_id=f"{owner.pk}:c1", owner=owner)
    DjangoChatMemoryRepository().append(
        conversation.conversation_id,
        [
            UserMessage("How do refunds work?", {"version": 99}),
            AssistantMessage("To the original payment method.", METADATA),
            UserMessage("Thanks"),
            AssistantMessage("You're welcome.", {"trace_id": "t0"}),
        ],
    )
    response = admin_client.get(f"/admin/advisors_app/conversation/{conversation.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count('class="reply-details"') == 1  # the older reply has nothing to show
    assert SUMMARY in page
    assert "Refunds &lt;b&gt;policy&lt;/b&gt; <small>0.83</small>" in page
    assert "bank.md" in page and "<code>clock</code> failed: boom (1 ms)" in page
    assert "v99" not in page  # user messages show no turn
