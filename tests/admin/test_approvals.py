"""Admin of tool-call approvals: the pending list, approve / reject actions, grants, and the
decisions on the call log and the transcript."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone

from advisors_app.models import (
    CallLog,
    ChatMessage,
    Conversation,
    ToolApproval,
    ToolApprovalGrant,
)
from advisors_app.models.approvals import arguments_hash

pytestmark = pytest.mark.django_db

LIST = "/admin/advisors_app/toolapproval/"
GRANTS = "/admin/advisors_app/toolapprovalgrant/"


@pytest.fixture
def resumed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The message ids the admin asked to resume (``enqueue_resume`` recorded, not run)."""
    calls: list[int] = []
    monkeypatch.setattr("advisors_app.approvals.jobs.enqueue_resume", calls.append)
    return calls


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def viewer(django_user_model: Any) -> Any:
    """Staff who may see tool approvals (view permission) but hold no approver permission."""
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(codename="view_toolapproval"),
        Permission.objects.get(codename="view_toolapprovalgrant"),
    )
    return user


def paused(
    owner: Any, calls: list[tuple[str, str, dict[str, Any]]], *, suffix: str = "c1", **fields: Any
) -> list[ToolApproval]:
    """A conversation of ``owner`` whose last message paused ``(call id, tool, arguments)``
    calls, with one pending row each (``fields`` override the rows' columns)."""
    conversation = Conversation.objects.create(conversation_id=f"{owner.pk}:{suffix}", owner=owner)
    message = ChatMessage.objects.create(
        conversation=conversation,
        sequence=2,
        message_type="assistant",
        metadata={"approval_pending": True},
        tool_calls=[
            {"id": cid, "name": tool, "arguments": args, "type": "function"}
            for cid, tool, args in calls
        ],
    )
    values = {
        "user": owner,
        "chain_slug": "notes",
        "conversation": conversation,
        "message": message,
        "allowed_decisions": ["approve", "edit", "reject"],
        "expires_at": timezone.now() + timedelta(hours=1),
        **fields,
    }
    return [
        ToolApproval.objects.create(
            approval_id=cid, tool=tool, arguments=args, arguments_hash=arguments_hash(args),
            **values,
        )
        for cid, tool, args in calls
    ]  # fmt: skip


def act(client: Client, action: str, rows: list[ToolApproval], **data: Any) -> Any:
    """Confirm ``action`` on ``rows`` (the second step of the admin action)."""
    post = {"action": action, "_selected_action": [r.pk for r in rows], "post": "yes", **data}
    return client.post(LIST + "?status=all", post, follow=True)


def shown(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def test_the_list_opens_on_pending_approvals_and_filters(admin_client: Client, alice: Any) -> None:
    pending = paused(alice, [("call_1", "save_note", {"text": "hi"})])[0]
    old = paused(
        alice, [("call_2", "delete_note", {"id": 3})], suffix="c2", chain_slug="other",
        expires_at=timezone.now() - timedelta(minutes=5),
    )[0]  # fmt: skip
    done = paused(alice, [("call_3", "save_note", {"text": "x"})], suffix="c3")[0]
    ToolApproval.objects.filter(pk=done.pk).update(status="approved")

    response = admin_client.get(LIST)
    assert response.status_code == 200
    assert set(response.context["cl"].queryset) == {pending, old}
    page = response.content.decode()
    assert "Pending approvals" in page
    assert page.count('class="approval-expired"') == 1
    assert "Pending (expired)" in page
    assert f"/admin/advisors_app/conversation/{pending.conversation_id}/change/" in page

    def listed(query: str) -> set[ToolApproval]:
        return set(admin_client.get(LIST + query).context["cl"].queryset)

    assert listed("?status=all") == {pending, old, done}
    assert listed("?status=approved") == {done}
    assert listed("?expired=yes") == {old}
    assert listed("?expired=no&status=all") == {pending, done}
    assert listed("?tool=delete_note") == {old}
    assert listed("?chain_slug=notes&status=all") == {pending, done}
    assert listed("?q=call_2") == {old}
    assert listed("?q=alice&status=all") == {pending, old, done}
    assert "Pending approvals" not in admin_client.get(LIST + "?status=all").content.decode()


def test_the_detail_page_is_read_only_and_shows_the_decision(
    admin_client: Client, alice: Any, admin_user: Any
) -> None:
    row = paused(alice, [("call_1", "save_note", {"text": "hi"})])[0]
    log = CallLog.objects.create(trace_id="t1", chain_slug="notes", status="ok", latency=0.1)
    ToolApproval.objects.filter(pk=row.pk).update(
        status="rejected", decision="reject", decided_by=admin_user,
        decided_at=timezone.now(), decision_reason="not today", call_log=log,
    )  # fmt: skip
    response = admin_client.get(f"{LIST}{row.pk}/change/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "not today" in page and "Rejected" in page
    assert f"/admin/auth/user/{admin_user.pk}/change/" in page  # decided by
    assert f"/admin/advisors_app/calllog/{log.pk}/change/" in page
    assert 'name="tool"' not in page and 'name="decision_reason"' not in page
    assert 'name="_save"' not in page
    assert admin_client.post(f"{LIST}{row.pk}/change/", {"tool": "x"}).status_code == 403
    assert admin_client.get(f"{LIST}add/").status_code == 403
    assert admin_client.get(f"{LIST}{row.pk}/delete/").status_code == 403
    row.refresh_from_db()
    assert row.tool == "save_note"


def test_approve_asks_first_then_records_and_resumes_once_all_are_decided(
    admin_client: Client, alice: Any, admin_user: Any, resumed: list[int]
) -> None:
    first, second = paused(
        alice, [("call_1", "save_note", {"text": "a"}), ("call_2", "save_note", {"text": "b"})]
    )
    confirm = admin_client.post(
        LIST, {"action": "approve_selected", "_selected_action": [first.pk]}
    )
    assert confirm.status_code == 200
    assert "Yes, approve" in confirm.content.decode()
    assert ToolApproval.objects.get(pk=first.pk).decided_at is None  # nothing yet

    response = act(admin_client, "approve_selected", [first])
    assert shown(response) == ["Approved 1 tool call(s)."]
    assert resumed == []  # call_2 still waits
    first.refresh_from_db()
    assert (first.decision, first.decided_by, first.status) == ("approve", admin_user, "pending")
    assert "approved, waiting to resume" in response.content.decode()

    response = act(admin_client, "approve_selected", [first, second])
    assert shown(response) == [
        "save_note (call_1): This call was decided by someone else meanwhile.",
        "Approved 1 tool call(s); 1 paused turn(s) resume now.",
    ]
    assert resumed == [first.message_id]


def test_reject_with_a_reason(admin_client: Client, alice: Any, resumed: list[int]) -> None:
    row = paused(alice, [("call_1", "delete_note", {"id": 1})])[0]
    confirm = admin_client.post(LIST, {"action": "reject_selected", "_selected_action": [row.pk]})
    assert 'name="reason"' in confirm.content.decode()
    response = act(admin_client, "reject_selected", [row], reason="Keep that note.")
    assert shown(response) == ["Rejected 1 tool call(s); 1 paused turn(s) resume now."]
    row.refresh_from_db()
    assert (row.decision, row.decision_reason) == ("reject", "Keep that note.")
    assert resumed == [row.message_id]


def test_a_refused_row_is_reported_and_the_others_still_decided(
    admin_client: Client, alice: Any, resumed: list[int]
) -> None:
    expired = paused(
        alice, [("call_1", "save_note", {})], expires_at=timezone.now() - timedelta(seconds=1)
    )[0]
    no_reject = paused(
        alice, [("call_2", "save_note", {})], suffix="c2", allowed_decisions=["approve"]
    )[0]
    fine = paused(alice, [("call_3", "save_note", {})], suffix="c3")[0]
    response = act(admin_client, "reject_selected", [expired, no_reject, fine])
    assert shown(response) == [
        "save_note (call_1): This approval has expired.",
        "save_note (call_2): Decision 'reject' is not allowed; allowed: approve.",
        "Rejected 1 tool call(s); 1 paused turn(s) resume now.",
    ]
    assert resumed == [fine.message_id]
    assert ToolApproval.objects.get(pk=expired.pk).status == "expired"


def test_staff_with_the_view_permission_decide_only_their_own(
    client: Client, alice: Any, viewer: Any, resumed: list[int]
) -> None:
    others = paused(alice, [("call_1", "save_note", {"text": "a"})])[0]
    own = paused(viewer, [("call_2", "save_note", {"text": "b"})], suffix="c2")[0]
    client.force_login(viewer)
    listing = client.get(LIST)
    assert set(listing.context["cl"].queryset) == {others, own}
    assert "approve_selected" in listing.content.decode()
    confirm = client.post(
        LIST, {"action": "approve_selected", "_selected_action": [others.pk, own.pk]}
    )
    assert "You may not decide this call" in confirm.content.decode()
    response = act(client, "approve_selected", [others, own])
    assert shown(response) == [
        "save_note (call_1): You may not decide this tool call.",
        "Approved 1 tool call(s); 1 paused turn(s) resume now.",
    ]
    assert resumed == [own.message_id]
    assert ToolApproval.objects.get(pk=others.pk).decided_at is None


def test_staff_without_a_permission_see_no_approvals(
    client: Client, alice: Any, django_user_model: Any
) -> None:
    row = paused(alice, [("call_1", "save_note", {})])[0]
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get(LIST).status_code == 403
    assert client.post(LIST, {"action": "approve_selected", "_selected_action": [row.pk],
                              "post": "yes"}).status_code == 403  # fmt: skip
    assert ToolApproval.objects.get(pk=row.pk).decided_at is None


def test_the_approver_permission_shows_the_list_and_decides_any_row(
    client: Client, alice: Any, django_user_model: Any, resumed: list[int]
) -> None:
    row = paused(alice, [("call_1", "save_note", {})])[0]
    approver = django_user_model.objects.create_user("boss", password="pw", is_staff=True)
    approver.user_permissions.add(Permission.objects.get(codename="decide_toolapproval"))
    client.force_login(approver)
    assert client.get(LIST).status_code == 200
    assert shown(act(client, "approve_selected", [row])) == [
        "Approved 1 tool call(s); 1 paused turn(s) resume now."
    ]


def test_arguments_are_shown_escaped(admin_client: Client, alice: Any) -> None:
    row = paused(alice, [("call_1", "save_note", {"text": "<script>alert(1)</script>"})])[0]
    for url in (LIST, f"{LIST}{row.pk}/change/"):
        page = admin_client.get(url).content.decode()
        assert "<script>alert(1)" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    confirm = admin_client.post(LIST, {"action": "approve_selected", "_selected_action": [row.pk]})
    assert "<script>alert(1)" not in confirm.content.decode()


def test_grants_list_filter_and_revoke(admin_client: Client, alice: Any, admin_user: Any) -> None:
    conversation = Conversation.objects.create(conversation_id=f"{alice.pk}:c1", owner=alice)
    active = ToolApprovalGrant.objects.create(
        conversation=conversation, tool="save_note", granted_by=alice
    )
    old = ToolApprovalGrant.objects.create(
        conversation=conversation, tool="delete_note", granted_by=alice,
        revoked_at=timezone.now(), revoked_by=alice,
    )  # fmt: skip
    assert set(admin_client.get(GRANTS).context["cl"].queryset) == {active, old}
    assert set(admin_client.get(GRANTS + "?state=active").context["cl"].queryset) == {active}
    assert set(admin_client.get(GRANTS + "?state=revoked").context["cl"].queryset) == {old}
    assert admin_client.get(f"{GRANTS}{active.pk}/change/").status_code == 200
    assert admin_client.post(f"{GRANTS}{active.pk}/change/", {}).status_code == 403

    response = admin_client.post(
        GRANTS, {"action": "revoke_selected", "_selected_action": [active.pk, old.pk]}, follow=True
    )
    assert shown(response) == ["Revoked 1 grant(s): those tools ask for approval again."]
    active.refresh_from_db()
    old.refresh_from_db()
    assert active.revoked_at is not None and active.revoked_by == admin_user
    assert old.revoked_by == alice  # already revoked: left as it was


def test_view_only_staff_revoke_only_grants_of_their_conversations(
    client: Client, alice: Any, viewer: Any
) -> None:
    theirs = Conversation.objects.create(conversation_id=f"{alice.pk}:c1", owner=alice)
    mine = Conversation.objects.create(conversation_id=f"{viewer.pk}:c1", owner=viewer)
    other = ToolApprovalGrant.objects.create(conversation=theirs, tool="save_note")
    own = ToolApprovalGrant.objects.create(conversation=mine, tool="save_note")
    client.force_login(viewer)
    response = client.post(
        GRANTS, {"action": "revoke_selected", "_selected_action": [other.pk, own.pk]}, follow=True
    )
    assert shown(response) == [
        f"{other}: you may not revoke this grant.",
        "Revoked 1 grant(s): those tools ask for approval again.",
    ]
    assert ToolApprovalGrant.objects.get(pk=other.pk).revoked_at is None
    assert ToolApprovalGrant.objects.get(pk=own.pk).revoked_by == viewer


def test_the_call_log_shows_the_calls_it_paused_and_the_decisions_it_ran(
    admin_client: Client, alice: Any, admin_user: Any
) -> None:
    pause = CallLog.objects.create(trace_id="t2", chain_slug="notes", status="ok", latency=0.1)
    resume = CallLog.objects.create(trace_id="t3", chain_slug="notes", status="ok", latency=0.2)
    plain = CallLog.objects.create(trace_id="t4", chain_slug="notes", status="ok", latency=0.3)
    row = paused(alice, [("call_1", "delete_note", {"id": "<b>7</b>"})], call_log=pause)[0]
    ToolApproval.objects.filter(pk=row.pk).update(
        status="rejected", decision="reject", decided_by=admin_user, decided_at=timezone.now(),
        decision_reason="Keep it", resumed_call_log=resume,
    )  # fmt: skip

    def page(log: CallLog) -> str:
        return admin_client.get(f"/admin/advisors_app/calllog/{log.pk}/change/").content.decode()

    paused_page = page(pause)
    assert "Tool calls this turn paused for" in paused_page
    assert "Decisions this turn ran" not in paused_page
    assert "delete_note" in paused_page and "Keep it" in paused_page
    assert "&lt;b&gt;7&lt;/b&gt;" in paused_page and "<b>7</b>" not in paused_page
    resumed_page = page(resume)
    assert "Decisions this turn ran" in resumed_page and "Rejected" in resumed_page
    assert "Tool calls this turn paused for" not in resumed_page
    assert "delete_note" not in page(plain)


def test_the_transcript_marks_waiting_and_decided_tool_calls(
    admin_client: Client, alice: Any, admin_user: Any
) -> None:
    waiting = paused(alice, [("call_1", "save_note", {"text": "a"})])[0]
    url = f"/admin/advisors_app/conversation/{waiting.conversation_id}/change/"
    assert "<strong>waiting for approval</strong>: <code>save_note</code>" in (
        admin_client.get(url).content.decode()
    )

    ToolApproval.objects.filter(pk=waiting.pk).update(
        status="edited", decision="edit", decided_by=admin_user, decided_at=timezone.now()
    )
    second = ChatMessage.objects.create(
        conversation_id=waiting.conversation_id, sequence=5, message_type="assistant",
        tool_calls=[{"id": "call_9", "name": "delete_note", "arguments": "{}"}],
        metadata={"approval_pending": True},
    )  # fmt: skip
    ToolApproval.objects.create(
        user=alice, chain_slug="notes", conversation_id=waiting.conversation_id, message=second,
        approval_id="call_9", tool="delete_note", arguments={}, arguments_hash="x",
        expires_at=timezone.now(), status="expired",
    )  # fmt: skip
    ChatMessage.objects.filter(pk=waiting.message_id).update(
        metadata={
            "approval_pending": False,
            "tool_call_decisions": [
                {"approval_id": "call_1", "decision": "edit", "arguments": {"text": "<i>b</i>"}},
            ],
        }
    )
    page = admin_client.get(url).content.decode()
    assert "waiting for approval" not in page
    assert "<code>save_note</code> edited and approved by admin at " in page
    assert "to {&quot;text&quot;: &quot;&lt;i&gt;b&lt;/i&gt;&quot;}" in page
    assert "<strong>approval expired: not executed</strong>: <code>delete_note</code>" in page
