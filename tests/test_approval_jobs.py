"""The resume task (``advisors_app.approvals.jobs``): decisions recorded outside the turn resume
it for its owner, once, and the owner's open chat socket receives the resumed turn's frames
flagged ``resumed_elsewhere``; a refused resume arrives as its ``error`` frame.

The task runs here in this process (``run_queued_tasks``: the worker's own runner), so the
socket and the task share the in-memory channel layer; ``tests/test_approvals_restart.py`` runs
it in a ``db_worker`` process over Redis.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.utils import timezone

from advisors_app.approvals.jobs import decisions_of, run_resume
from advisors_app.definition.tools import tool_registry
from advisors_app.models import ChatMessage, ToolApproval
from advisors_app.turn import call_turn
from tests.api.conftest import client_for
from tests.task_worker import run_queued_tasks
from tests.test_approvals import memo_call, save_memo, saved, script
from tests.test_consumers import frames_until_end, open_socket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache", "memo_chain"),
]


@pytest.fixture(autouse=True)
def _memo_tool() -> Iterator[None]:
    saved.clear()
    tool_registry.register(save_memo, replace=True)
    yield
    tool_registry.unregister("save_memo")


@pytest.fixture
def memo_chain() -> Any:
    from tests.test_approvals import build

    return build(
        "memos",
        (("message_chat_memory", {"max_messages": 20}), ("tool_calling", {})),
        ["save_memo"],
    )


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def approver(django_user_model: Any) -> Any:
    user = django_user_model.objects.create_user("carol", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="decide_toolapproval"))
    return user


def decide(user: Any, **body: Any) -> Any:
    row = ToolApproval.objects.get()
    return client_for(user).post(
        f"/api/approvals/{row.pk}/decision/", body or {"decision": "approve"}, format="json"
    )


async def test_an_approvers_decision_resumes_the_turn_on_the_owners_open_socket(
    alice: Any, approver: Any
) -> None:
    await sync_to_async(script)(memo_call(), ["Saved ", "it."])
    socket = await open_socket(alice, "memos")
    try:
        await socket.send_json_to({"type": "message", "message": "Save a memo: milk"})
        paused = await frames_until_end(socket)
        assert [f["type"] for f in paused] == ["start", "approval_required", "done"]
        conversation = paused[0]["conversation_id"]

        queued = await sync_to_async(decide)(approver)
        assert queued.status_code == 202, queued.content
        assert saved == []
        assert await sync_to_async(run_queued_tasks)() == 1

        frames = await frames_until_end(socket)
        kinds = [f["type"] for f in frames]
        assert kinds[0] == "start" and kinds[-1] == "done"
        assert {"tool_call", "tool_result", "delta"} <= set(kinds)
        assert all(f["resumed_elsewhere"] is True for f in frames)
        assert all(f["conversation_id"] == conversation for f in frames)
        assert frames[-1]["content"] == "Saved it." and frames[-1]["stored"]
        # Then the conversation list's notice, as after any turn.
        notice = await socket.receive_json_from(timeout=5)
        assert notice == {
            "type": "conversation",
            "conversation_id": conversation,
            "title": "Save a memo: milk",
            "removed": False,
        }
    finally:
        await socket.disconnect()
    assert saved == [("milk", "alice")]  # once, for the owner

    def check() -> None:
        kinds = [m.message_type for m in ChatMessage.objects.order_by("sequence")]
        assert kinds == ["user", "assistant", "tool", "assistant"]
        row = ToolApproval.objects.get()
        assert (row.status, row.decided_by.username) == ("approved", "carol")
        # A second run of the task (a retry by hand) finds nothing to resume.
        assert run_queued_tasks() == 0

    await sync_to_async(check)()
    message_id = (await ToolApproval.objects.aget()).message_id
    skipped = await run_resume(message_id)
    assert skipped["status"] == "skipped" and "not all pending" in skipped["reason"]
    assert saved == [("milk", "alice")]


async def test_the_resumed_turns_frames_carry_event_ids_and_can_be_resumed(
    alice: Any, approver: Any
) -> None:
    """The worker publishes as a live turn does (issue 23): numbered frames, kept in the turn
    buffer, so a socket that was away when the worker ran resumes the turn — missing nothing,
    seeing nothing twice."""
    await sync_to_async(script)(memo_call(), ["Saved ", "it."])
    watching = await open_socket(alice, "memos")
    try:
        await watching.send_json_to({"type": "message", "message": "Save a memo: milk"})
        conversation = (await frames_until_end(watching))[0]["conversation_id"]
        assert (await sync_to_async(decide)(approver)).status_code == 202
        assert await sync_to_async(run_queued_tasks)() == 1
        live = await frames_until_end(watching)
    finally:
        await watching.disconnect()
    ids = [f["event_id"] for f in live]
    trace_id = ids[0].rpartition("-")[0]
    assert ids == [f"{trace_id}-{n}" for n in range(1, len(live) + 1)]
    assert live[0]["trace_id"] == trace_id

    # Another device comes back having seen the first two frames only.
    back = await open_socket(alice, "memos")
    try:
        await back.send_json_to(
            {"type": "resume", "conversation_id": conversation, "last_event_id": ids[1]}
        )
        resumed = await frames_until_end(back)
        assert await back.receive_nothing(timeout=0.3)
    finally:
        await back.disconnect()
    assert [f["event_id"] for f in resumed] == ids[2:]
    assert not any(f.get("resumed_elsewhere") for f in resumed)
    assert resumed[-1]["type"] == "done" and resumed[-1]["content"] == "Saved it."


async def test_a_refused_resume_is_published_as_an_error_frame(alice: Any, approver: Any) -> None:
    await sync_to_async(script)(memo_call())
    paused = await call_turn("memos", alice, "Save a memo: milk")
    socket = await open_socket(alice, "memos")
    try:
        queued = await sync_to_async(decide)(approver)
        assert queued.status_code == 202
        # It expires between the decision and the worker's run.
        await ToolApproval.objects.aupdate(expires_at=timezone.now() - timedelta(seconds=1))
        assert await sync_to_async(run_queued_tasks)() == 1
        [error] = await frames_until_end(socket)
        assert error["type"] == "error" and error["code"] == "invalid"
        assert "expired" in error["errors"]["decisions"][0]
        assert error["resumed_elsewhere"] is True
        assert error["conversation_id"] == paused.conversation_id
    finally:
        await socket.disconnect()
    assert saved == [] and (await ToolApproval.objects.aget()).status == "expired"


async def test_the_decisions_are_built_from_the_rows(alice: Any) -> None:
    rows = [
        ToolApproval(approval_id="a", decision="approve", decision_reason=""),
        ToolApproval(approval_id="b", decision="edit", decided_arguments={"text": "x"}),
        ToolApproval(approval_id="c", decision="reject", decision_reason="no"),
    ]
    assert decisions_of(rows) == [
        {"approval_id": "a", "decision": "approve"},
        {"approval_id": "b", "decision": "edit", "arguments": {"text": "x"}},
        {"approval_id": "c", "decision": "reject", "reason": "no"},
    ]


async def test_a_refused_resume_forgets_the_recorded_decisions(
    alice: Any, approver: Any, settings: Any
) -> None:
    await sync_to_async(script)(memo_call())
    await call_turn("memos", alice, "Save a memo: milk")
    # The owner's chat rate is used up: the resume run for them is refused (throttled).
    settings.ADVISORS = {**getattr(settings, "ADVISORS", {}), "CHAT_THROTTLE_RATE": "1/hour"}
    queued = await sync_to_async(decide)(approver)
    assert queued.status_code == 202
    assert await sync_to_async(run_queued_tasks)() == 1
    row = await ToolApproval.objects.aget()
    # Not stuck: still pending, and free to be decided again.
    assert (row.status, row.decision, row.decided_at) == ("pending", "", None)
    assert saved == []
