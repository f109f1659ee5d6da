"""The approvals API (issue 19): the caller's list with its status filter, one approval, a
decision outside the turn (403 / 400 / 409, 200 while other calls wait, 202 once the resume is
queued) and a conversation's grants (list, revoke: the tool needs approval again).

The resume task itself, and the frames it pushes to the owner's sockets, are tested in
``tests/test_approval_jobs.py``; across processes and a restart in
``tests/test_approvals_restart.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone
from django_tasks_db.models import DBTaskResult

from advisors_app.core import ToolCall
from advisors_app.core.testing import tool_call_response
from advisors_app.definition.tools import tool_registry
from advisors_app.models import ToolApproval, ToolApprovalGrant
from tests.api.conftest import client_for
from tests.task_worker import run_queued_tasks
from tests.test_approvals import build, memo_call, save_memo, saved, script

pytestmark = pytest.mark.django_db(transaction=True)

ITEM_KEYS = {
    *("id", "approval_id", "tool", "arguments", "allowed_decisions", "reason", "status"),
    *("decision", "decided_arguments", "decision_reason", "decided_by", "decided_at"),
    *("expires_at", "created_at", "chain", "conversation_id"),
}


@pytest.fixture(autouse=True)
def _memo_tool() -> Iterator[None]:
    saved.clear()
    tool_registry.register(save_memo, replace=True)
    yield
    tool_registry.unregister("save_memo")


@pytest.fixture
def memos() -> Any:
    return build(
        "memos",
        (("message_chat_memory", {"max_messages": 20}), ("tool_calling", {})),
        ["save_memo"],
    )


@pytest.fixture
def approver(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user("carol", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="decide_toolapproval"))
    return user


def pause(user: Any, message: str = "memo", conversation: str | None = None) -> dict[str, Any]:
    """Run a turn of ``memos`` for ``user`` that pauses; its answer."""
    body: dict[str, Any] = {"message": message}
    if conversation:
        body["conversation_id"] = conversation
    response = client_for(user).post("/api/chains/memos/call/", body, format="json")
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["finish_reason"] == "APPROVAL_REQUIRED"
    return answer


def decide(user: Any, approval: ToolApproval, **body: Any) -> Any:
    return client_for(user).post(
        f"/api/approvals/{approval.pk}/decision/", body or {"decision": "approve"}, format="json"
    )


def test_the_list_shows_the_callers_own_approvals_filtered_by_status(
    memos: Any, alice: Any, bob: Any
) -> None:
    script(memo_call("m1"), "saved", memo_call("m2", "eggs"), memo_call("m3"), memo_call("b1"))
    first = pause(alice)
    approve = [{"approval_id": "m1", "decision": "approve"}]
    resumed = client_for(alice).post(
        "/api/chains/memos/call/",
        {"conversation_id": first["conversation_id"], "decisions": approve},
        format="json",
    )
    assert resumed.status_code == 200, resumed.content
    pause(alice, "another", first["conversation_id"])  # m2: expires below
    ToolApproval.objects.filter(approval_id="m2").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    third = pause(alice, "a third")  # m3: pending, in a new conversation
    pause(bob)  # b1: bob's, never alice's

    api = client_for(alice)

    def listed(query: str = "") -> list[dict[str, Any]]:
        response = api.get(f"/api/approvals/{query}")
        assert response.status_code == 200, response.content
        body = response.json()
        assert set(body) == {"count", "next", "previous", "results"}
        return body["results"]

    [pending] = listed()
    assert listed("?status=pending") == [pending]
    assert set(pending) == ITEM_KEYS
    assert pending["approval_id"] == "m3" and pending["status"] == "pending"
    assert pending["conversation_id"] == third["conversation_id"]  # the public id
    assert pending["chain"] == "memos" and pending["arguments"] == {"text": "milk"}
    assert pending["allowed_decisions"] == ["approve", "edit", "reject"]
    assert "requires approval" in pending["reason"]
    assert (pending["decision"], pending["decided_by"], pending["decided_at"]) == (None, None, None)

    [approved] = listed("?status=approved")
    assert approved["approval_id"] == "m1" and approved["decided_by"] == "alice"
    assert (approved["decision"], approved["status"]) == ("approve", "approved")
    # A pending row past its expiry is reported as expired, and filtered as such.
    [expired] = listed("?status=expired")
    assert expired["approval_id"] == "m2" and expired["status"] == "expired"
    assert listed("?status=rejected") == [] and listed("?status=edited") == []
    assert [a["approval_id"] for a in listed("?status=all")] == ["m3", "m2", "m1"]

    refused = api.get("/api/approvals/?status=bogus")
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["code"] == "invalid" and "bogus" in error["fields"]["status"][0]
    assert client_for(None).get("/api/approvals/").status_code == 401


def test_one_approval_is_shown_to_its_owner_and_approvers_only(
    memos: Any, alice: Any, bob: Any, approver: Any
) -> None:
    script(memo_call("m1"))
    pause(alice)
    row = ToolApproval.objects.get()
    url = f"/api/approvals/{row.pk}/"
    shown = client_for(alice).get(url)
    assert shown.status_code == 200 and shown.json()["approval_id"] == "m1"
    assert client_for(approver).get(url).json()["id"] == row.pk
    hidden = client_for(bob).get(url)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "not_found"
    assert client_for(alice).get("/api/approvals/999999/").status_code == 404
    # Bob cannot decide what he cannot see either.
    assert decide(bob, row).status_code == 404
    assert ToolApproval.objects.get().decided_at is None


def test_a_decision_waits_for_the_other_calls_of_the_reply_then_queues_the_resume(
    memos: Any, alice: Any, approver: Any
) -> None:
    two = tool_call_response(
        ToolCall("m1", "save_memo", json.dumps({"text": "milk"})),
        ToolCall("m2", "save_memo", json.dumps({"text": "eggs"})),
    )
    script(two, "Saved one, skipped one.")
    pause(alice)
    first, second = ToolApproval.objects.order_by("approval_id")

    waiting = decide(approver, first)
    assert waiting.status_code == 200, waiting.content
    assert waiting.json()["decided_by"] == "carol" and waiting.json()["status"] == "pending"
    assert DBTaskResult.objects.count() == 0  # nothing to resume yet

    queued = decide(alice, second, decision="reject", reason="not eggs")
    assert queued.status_code == 202, queued.content
    body = queued.json()
    assert body["status"] == "queued" and body["task_id"]
    assert body["approval"]["decision"] == "reject"
    assert body["approval"]["decision_reason"] == "not eggs"
    assert str(DBTaskResult.objects.get().id) == body["task_id"]
    assert saved == []

    assert run_queued_tasks() == 1
    assert saved == [("milk", "alice")]  # run once, for the owner
    rows = {row.approval_id: row for row in ToolApproval.objects.all()}
    assert (rows["m1"].status, rows["m1"].decided_by) == ("approved", approver)
    assert (rows["m2"].status, rows["m2"].decided_by) == ("rejected", alice)
    assert rows["m1"].resumed_call_log is not None
    # Deciding again is a conflict: the call ran.
    again = decide(approver, first)
    assert again.status_code == 409 and "approved already" in again.json()["error"]["message"]


def test_decisions_that_cannot_be_recorded_are_refused_and_change_nothing(
    memos: Any, alice: Any, bob: Any
) -> None:
    script(memo_call("m1"), "saved")
    pause(alice)
    row = ToolApproval.objects.get()

    cases = [
        ({"decision": "maybe"}, "decision"),
        ({"decision": "edit"}, "arguments"),
        ({"decision": "edit", "arguments": [1]}, "arguments"),
        ({"decision": "approve", "grant": True}, "grant"),
        ({"decision": "approve", "approval_id": "m1"}, "approval_id"),
    ]
    for body, field in cases:
        refused = decide(alice, row, **body)
        assert refused.status_code == 400, (body, refused.content)
        assert field in refused.json()["error"]["fields"], (body, refused.json())
    assert ToolApproval.objects.get().decided_at is None

    # Twice: the second is a conflict naming who decided.
    assert decide(alice, row, decision="edit", arguments={"text": "oat milk"}).status_code == 202
    twice = decide(alice, row)
    assert twice.status_code == 409
    assert twice.json()["error"]["code"] == "conflict"
    assert "decided already (edit, by alice)" in twice.json()["error"]["message"]
    assert run_queued_tasks() == 1 and saved == [("oat milk", "alice")]


def test_an_expired_approval_is_refused(memos: Any, alice: Any) -> None:
    script(memo_call("m1"))
    pause(alice)
    ToolApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    row = ToolApproval.objects.get()
    refused = decide(alice, row)
    assert refused.status_code == 400
    assert "expired" in refused.json()["error"]["fields"]["decision"][0]
    assert ToolApproval.objects.get().status == "expired"  # recorded as such
    again = decide(alice, row)
    assert again.status_code == 400 and "expired" in again.json()["error"]["fields"]["decision"][0]
    assert DBTaskResult.objects.count() == 0 and saved == []


def test_only_holders_of_the_chains_approver_permission_may_decide(
    alice: Any, approver: Any
) -> None:
    model = build(
        "strict",
        (
            ("message_chat_memory", {}),
            ("tool_calling", {"approvers": "advisors_app.decide_toolapproval"}),
        ),
        ["save_memo"],
    )
    model.add(memo_call("m1"), "saved")
    response = client_for(alice).post(
        "/api/chains/strict/call/", {"message": "memo"}, format="json"
    )
    assert response.json()["finish_reason"] == "APPROVAL_REQUIRED"
    row = ToolApproval.objects.get()
    # The owner sees the call but may not decide it.
    assert client_for(alice).get(f"/api/approvals/{row.pk}/").status_code == 200
    refused = decide(alice, row)
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "permission_denied"
    assert "advisors_app.decide_toolapproval" in error["message"]
    assert ToolApproval.objects.get().decided_at is None

    assert decide(approver, row).status_code == 202
    assert run_queued_tasks() == 1 and saved == [("milk", "alice")]


def test_grants_are_listed_and_revoking_one_restores_approval(
    memos: Any, alice: Any, bob: Any
) -> None:
    script(memo_call("m1", "one"), "saved one", memo_call("m2", "two"), "saved two")
    script(memo_call("m3", "three"))
    conversation = pause(alice)["conversation_id"]
    api = client_for(alice)
    grants_url = f"/api/conversations/{conversation}/grants/"
    assert api.get(grants_url).json()["results"] == []
    grant = [{"approval_id": "m1", "decision": "approve", "grant": True}]
    resumed = api.post(
        "/api/chains/memos/call/",
        {"conversation_id": conversation, "decisions": grant},
        format="json",
    )
    assert resumed.status_code == 200, resumed.content

    [listed] = api.get(grants_url).json()["results"]
    assert listed["tool"] == "save_memo" and listed["granted_by"] == "alice"
    assert listed["created_at"]
    # Granted: the next call runs without asking.
    second = api.post(
        "/api/chains/memos/call/",
        {"message": "memo two", "conversation_id": conversation},
        format="json",
    )
    assert second.json()["content"] == "saved two"
    assert [text for text, _ in saved] == ["one", "two"]

    # Someone else's conversation is not found, for listing and revoking alike.
    assert client_for(bob).get(grants_url).status_code == 404
    assert client_for(bob).delete(grants_url + "save_memo/").status_code == 404

    assert api.delete(grants_url + "save_memo/").status_code == 204
    gone = api.delete(grants_url + "save_memo/")
    assert gone.status_code == 404 and "save_memo" in gone.json()["error"]["message"]
    assert api.get(grants_url).json()["results"] == []
    row = ToolApprovalGrant.objects.get()
    assert row.revoked_at is not None and row.revoked_by == alice

    # Revoked: the next call pauses again.
    pause(alice, "memo three", conversation)
    assert [text for text, _ in saved] == ["one", "two"]
