"""The chat page and the staff trace view: login, ownership, transcript, chain choice, JSON."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.memory.conversations import conversation_key
from advisors_app.models import AdvisorChain, CallLog, Conversation
from advisors_app.stores.memory import DjangoChatMemoryRepository
from tests.factories import make_chain

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def conversation(user: Any, public_id: str, *messages: Any, title: str = "Trip") -> str:
    key = conversation_key(user, public_id)
    Conversation.objects.create(conversation_id=key, owner=user, title=title)
    DjangoChatMemoryRepository().append(key, list(messages))
    return key


def test_the_chat_page_needs_a_login(client: Client) -> None:
    response = client.get("/chat/")
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/chat/"


def test_the_site_login_page_logs_in_any_user_and_goes_to_the_chat(
    client: Client, alice: Any
) -> None:
    assert client.get("/accounts/login/").status_code == 200
    response = client.post(
        "/accounts/login/", {"username": "alice", "password": "pw", "next": "/chat/"}
    )
    assert response.status_code == 302 and response["Location"] == "/chat/"
    assert client.get("/chat/").status_code == 200


def test_the_page_lists_chains_and_own_conversations_only(alice: Any, bob: Any) -> None:
    make_chain("support")
    make_chain("sales", description="Prices & plans")
    AdvisorChain.objects.filter(slug="sales").update(name="Sales <team>")
    make_chain("retired", enabled=False)
    conversation(alice, "a1", title="Alice's trip")
    conversation(bob, "b1", title="Bob's secret")
    response = logged_in(alice).get("/chat/")
    page = response.content.decode()
    assert [c["slug"] for c in response.context["chains"]] == ["sales", "support"]
    assert "Sales &lt;team&gt;" in page and "retired" not in page
    assert "Alice&#x27;s trip" in page and "Bob" not in page
    assert 'href="/chat/c/a1/"' in page
    assert response.context["config"] == {
        "chain": "sales",
        "conversationId": None,
        "chatUrl": "/chat/",
        "wsPath": "/ws/chat/",
        "loginUrl": "/accounts/login/",
        "traceUrl": None,
        "feedbackReasons": [
            ["wrong", "Wrong or made up"],
            ["incomplete", "Incomplete"],
            ["unhelpful", "Not helpful"],
            ["unsafe", "Unsafe or offensive"],
            ["other", "Other"],
        ],
    }
    assert 'id="chat-config" type="application/json"' in page
    assert "vendor/markdown-it/markdown-it.umd.min.js" in page


def test_an_open_conversation_shows_its_transcript_escaped(alice: Any) -> None:
    make_chain("support")
    make_chain("sales")
    key = conversation(
        alice,
        "a1",
        UserMessage("<script>alert(1)</script> hi"),
        AssistantMessage("**Hello** <img src=x onerror=alert(1)>", {"trace_id": "t1"}),
        UserMessage("more"),
        AssistantMessage("Roses are", {"interrupted": True, "finish_reason": "cancelled"}),
    )
    CallLog.objects.create(
        chain_slug="support",
        conversation_id=key,
        trace_id="t1",
        mode="stream",
        status="ok",
        latency=0.1,
    )
    response = logged_in(alice).get("/chat/c/a1/")
    page = response.content.decode()
    assert [(m["role"], m["text"]) for m in response.context["messages"]] == [
        ("user", "<script>alert(1)</script> hi"),
        ("assistant", "**Hello** <img src=x onerror=alert(1)>"),
        ("user", "more"),
        ("assistant", "Roses are"),
    ]
    assert "<script>alert(1)</script>" not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; hi" in page
    assert "Stopped before the end." in page
    # The stored trace id lets the page link the reply to its trace, as the live one did.
    assert [m["trace_id"] for m in response.context["messages"]] == [None, "t1", None, None]
    assert page.count("data-trace-id=") == 1 and 'data-trace-id="t1"' in page
    assert 'aria-current="page"' in page
    # The chain the conversation was last continued with is preselected.
    assert response.context["chain"] == "support"
    assert response.context["config"]["conversationId"] == "a1"
    assert logged_in(alice).get("/chat/c/a1/?chain=sales").context["chain"] == "sales"


def test_another_users_conversation_is_a_404(alice: Any, bob: Any) -> None:
    conversation(alice, "a1", UserMessage("secret"), AssistantMessage("noted"))
    assert logged_in(bob).get("/chat/c/a1/").status_code == 404
    assert logged_in(bob).get("/chat/c/../").status_code == 404


def test_the_page_says_so_when_there_is_no_chain(alice: Any) -> None:
    page = logged_in(alice).get("/chat/").content.decode()
    assert "There is no chain to chat with yet" in page


@pytest.fixture
def log(alice: Any) -> CallLog:
    trace = {
        "duration": 0.2,
        "entries": [
            {"index": 0, "parent": None, "name": "AppendAdvisor", "order": 0, "mode": "stream",
             "started": 0.0, "duration": 0.2, "self_duration": 0.01, "first_chunk": 0.05,
             "chunks": 3, "usage": {"total_tokens": 9}, "status": "ok", "error": None},
            {"index": 1, "parent": 0, "name": "stream", "order": 2**31 - 1, "mode": "stream",
             "started": 0.01, "duration": 0.19, "self_duration": 0.19, "first_chunk": 0.04,
             "chunks": 3, "usage": None, "status": "ok", "error": None},
        ],
    }  # fmt: skip
    return CallLog.objects.create(
        chain_slug="support", user=alice, trace_id="abc123", mode="stream", status="ok",
        latency=0.2, time_to_first_token=0.05, usage={"total_tokens": 9}, trace=trace,
    )  # fmt: skip


def test_staff_who_may_view_call_logs_get_the_trace(django_user_model: Any, log: CallLog) -> None:
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="view_calllog"))
    page = logged_in(staff).get("/chat/")
    assert page.context["config"]["traceUrl"] == "/chat/traces/TRACE_ID/"
    response = logged_in(staff).get("/chat/traces/abc123/")
    assert response.status_code == 200
    data = response.json()
    assert (data["chain"], data["status"], data["latency"]) == ("support", "ok", 0.2)
    assert data["admin_url"] == f"/admin/advisors_app/calllog/{log.pk}/change/"
    assert [(r["name"], r["depth"], r["order"]) for r in data["rows"]] == [
        ("AppendAdvisor", 0, "0"),
        ("stream", 1, "LOWEST"),
    ]
    assert logged_in(staff).get("/chat/traces/nope/").status_code == 404


def test_others_get_no_trace(alice: Any, django_user_model: Any, log: CallLog) -> None:
    staff_without_permission = django_user_model.objects.create_user(
        "staff", password="pw", is_staff=True
    )
    for user in (alice, staff_without_permission):
        assert logged_in(user).get("/chat/traces/abc123/").status_code == 403
        assert logged_in(user).get("/chat/").context["config"]["traceUrl"] is None
    assert Client().get("/chat/traces/abc123/").status_code == 302


#: What a turn stores with its reply (``TurnOutcome.reply_metadata``), with hostile text in it.
REPLY_METADATA = {
    "trace_id": "t9",
    "version": 3,
    "sources": [
        {
            "document_id": "42",
            "title": "<img src=x onerror=alert(1)>refunds.md",
            "source": "refunds.md",
            "score": 0.8312,
            "snippet": "</script><script>alert(2)</script>",
        }
    ],
    "tools": [
        {
            "id": "call_1",
            "name": "calculator",
            "arguments": '{"expression": "6*7"}',
            "ok": True,
            "error": None,
            "duration_ms": 2.5,
        }
    ],
    "usage": {"prompt_tokens": 31, "completion_tokens": 9, "total_tokens": 40},
    "finish_reason": "STOP",
    "timings": {"latency_ms": 812.5, "time_to_first_token_ms": 120.25},
    "provider_internal": "not for the page",
}


def test_a_reopened_reply_carries_its_turn_for_the_script_as_json_only(alice: Any) -> None:
    make_chain("support")
    conversation(
        alice,
        "a1",
        UserMessage("What is 6*7?"),
        AssistantMessage("42.", REPLY_METADATA),
        UserMessage("And before?"),
        AssistantMessage("Older reply.", {"trace_id": "t0"}),  # stored before replies kept more
        UserMessage("More?"),
        AssistantMessage("Cut", {"interrupted": True, "finish_reason": "cancelled"}),
    )
    response = logged_in(alice).get("/chat/c/a1/")
    page = response.content.decode()
    messages = response.context["messages"]
    replies = [m for m in messages if m["role"] == "assistant"]
    expected = {k: v for k, v in REPLY_METADATA.items() if k != "provider_internal"}
    assert [m["details"] for m in replies] == [
        expected,
        {"trace_id": "t0"},
        {"interrupted": True, "finish_reason": "cancelled"},
    ]
    assert all(m["details"] == {} for m in messages if m["role"] == "user")
    assert response.context["replies"] == {str(m["id"]): m["details"] for m in replies}
    # Each reply names its entry in the embedded JSON; the JSON cannot close its script tag.
    for reply in replies:
        assert f'data-reply-id="{reply["id"]}"' in page
    assert page.count("data-reply-id=") == 3
    assert 'id="chat-replies" type="application/json"' in page
    assert "<img src=x" not in page and "<script>alert(2)" not in page
    assert "\\u003Cimg src=x onerror=alert(1)\\u003Erefunds.md" in page
    assert "not for the page" not in page
    assert replies[2]["interrupted"] and "Stopped before the end." in page


def test_a_new_chat_embeds_no_replies(alice: Any) -> None:
    make_chain("support")
    response = logged_in(alice).get("/chat/")
    assert response.context["replies"] == {}
    assert '<script id="chat-replies" type="application/json">{}</script>' in (
        response.content.decode()
    )


def test_the_page_opens_on_the_configured_default_chain(alice: Any, settings: Any) -> None:
    make_chain("alpha")
    make_chain("python-docs")
    settings.ADVISORS = {"CHAT_PAGE_DEFAULT_CHAIN": "python-docs"}
    assert logged_in(alice).get("/chat/").context["chain"] == "python-docs"
    settings.ADVISORS = {"CHAT_PAGE_DEFAULT_CHAIN": "gone"}  # unknown: the first by slug
    assert logged_in(alice).get("/chat/").context["chain"] == "alpha"


def test_the_composer_takes_a_long_paste_whole_and_names_the_limit(alice: Any) -> None:
    """No ``maxlength`` on the message box (a browser cuts a paste there without a word and
    sends the rest); the limit is on the form for the page's script, which says so and refuses
    to send (tests/browser/test_rough_edges.py), as the server would (field ``message``)."""
    make_chain("support")
    page = logged_in(alice).get("/chat/").content.decode()
    textarea = page[page.index('<textarea id="prompt"') :].split(">", 1)[0]
    assert "maxlength" not in textarea
    assert 'data-max-chars="8000"' in page
