"""Resuming a paused turn whose calls were decided outside it (an approver, another device).

Decisions made in a turn (``decisions`` on REST call/stream or the websocket) resume it at once.
Decisions recorded on the rows instead — ``POST /api/approvals/<id>/decision/`` or the admin,
through :func:`advisors_app.approvals.pauses.record_decision` — leave the turn paused until every
call
of its reply is decided; then :func:`enqueue_resume` queues :data:`resume_approvals`, and a task
worker (``manage.py db_worker``, any process on any machine) runs the resumed turn **for the
conversation's owner** through the turn (:func:`advisors_app.turn.stream_turn`
with ``TurnInput(None, <public id>, decisions=...)``), so the checks are those of any resume
(expiry, arguments hash, who decided, the chain's policy for the final arguments) and the rows
are claimed atomically: a resume in a turn and this task never both run the calls. Only this
resume runs the recorded decisions for an owner who may not decide them
(:func:`~advisors_app.approvals.pauses.replaying_recorded`): the owner re-sending them in a
turn is refused, with or without a grant (issue 36).

The events of the resumed turn are published as a live turn's are
(:class:`~advisors_app.turn.buffer.TurnPublisher`): each gets its ``event_id``
(``"<trace_id>-<n>"``) and goes to the conversation's turn buffer and, in ``turn.events``
batches, to the owner's channel-layer group (:func:`~advisors_app.turn.buffer.user_group`), so
the owner's open chat sockets — any process — get it flagged ``resumed_elsewhere`` and a socket
that was away sends ``resume`` and gets what it missed; then the ``conversation.updated``
message a websocket turn sends. A resume the turn refuses
(:class:`~advisors_app.turn.events.TurnError`: a call expired, an edit the policy refuses, decided
meanwhile) runs no turn, so it has no ids: it is logged and published as one ``error`` event
(``{"type": "turn.event", "conversation_id", "event"}``, handler ``turn_event``). Without a
channel layer the turn runs all the same (the buffer keeps it in this process); nobody is told.
"""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer

from advisors_app.approvals.pauses import forget_decisions, replaying_recorded
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.models import ToolApproval
from advisors_app.turn import TurnInput, stream_turn
from advisors_app.turn.buffer import TurnPublisher, user_group
from advisors_app.turn.delivery import DeltaCoalescer
from advisors_app.turn.events import TurnError, error_event

try:
    from django.tasks import task  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

__all__ = ["TURN_EVENT", "decisions_of", "enqueue_resume", "resume_approvals", "run_resume"]

logger = logging.getLogger("advisors_app.approvals.pauses")

#: The channel-layer message type of one event of a resumed turn (handler ``turn_event``).
TURN_EVENT = "turn.event"


def decisions_of(rows: list[ToolApproval]) -> list[dict[str, Any]]:
    """The resume's decisions in the JSON shape turns take, from the decisions recorded on
    ``rows``: ``{"approval_id", "decision", "arguments"?, "reason"?}`` per row."""
    decisions = []
    for row in rows:
        item: dict[str, Any] = {"approval_id": row.approval_id, "decision": row.decision}
        if row.decision == "edit" and row.decided_arguments is not None:
            item["arguments"] = row.decided_arguments
        if row.decision_reason:
            item["reason"] = row.decision_reason
        decisions.append(item)
    return decisions


def enqueue_resume(message_id: int) -> str:
    """Queue the resume of the paused reply ``message_id`` (every call decided); the task id."""
    return str(resume_approvals.enqueue(message_id).id)


def _load(message_id: int) -> tuple[list[ToolApproval], str | None]:
    """The paused reply's rows, and why it cannot resume (``None``: it can)."""
    rows = list(
        ToolApproval.objects.filter(message_id=message_id)
        .select_related("user", "conversation")
        .order_by("pk")
    )
    if not rows:
        return rows, "no approvals belong to this message"
    if any(row.status != ToolApproval.Status.PENDING for row in rows):
        return rows, "its calls are not all pending (resumed, or expired, meanwhile)"
    if any(row.decided_at is None or not row.decision for row in rows):
        return rows, "not every call has a decision yet"
    return rows, None


async def _publish(owner: Any, message: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        await layer.group_send(user_group(owner), message)
    except Exception:  # telling the sockets must never fail the resumed turn
        logger.exception("Could not publish a resumed turn's event to user %s", owner.pk)


async def run_resume(message_id: int) -> dict[str, Any]:
    """Run the resume of the paused reply ``message_id`` for its owner and publish its events
    (see the module docstring); what the task returns: ``{"status": "done" | "refused" |
    "skipped", ...}``. A reply that is not ready (a call undecided, or resumed already) is
    skipped and logged."""
    rows, problem = await sync_to_async(_load)(message_id)
    if problem is not None:
        logger.info("Approvals of message %s not resumed: %s", message_id, problem)
        return {"status": "skipped", "message_id": message_id, "reason": problem}
    first = rows[0]
    owner = first.user
    public = public_conversation_id(first.conversation.conversation_id)
    turn = TurnInput(None, public, decisions=decisions_of(rows))
    try:
        # The owner may not be allowed to decide these calls (a chain naming ``approvers``):
        # only this resume may run the decisions recorded on them for the owner.
        with replaying_recorded(message_id):
            stream = await stream_turn(first.chain_slug, owner, turn)
    except TurnError as refused:
        logger.warning(
            "Resume of message %s (conversation %s) refused: %s %s",
            message_id,
            first.conversation.conversation_id,
            refused.message,
            refused.errors or "",
        )
        # Nothing ran, and the recorded decisions cannot run: forget them, so the calls can be
        # decided again (in a turn, the API or the admin) instead of staying stuck.
        await sync_to_async(forget_decisions)(message_id)
        # The conversation is still there, so the frame names it.
        event = {**error_event(refused).to_dict(), "conversation_id": public}
        await _publish(owner, {"type": TURN_EVENT, "conversation_id": public, "event": event})
        return {"status": "refused", "message_id": message_id, "error": event}
    final: dict[str, Any] = {}
    publisher = TurnPublisher(owner, stream.conversation_id, stream.trace_id)
    try:
        async for turn_event in DeltaCoalescer(stream):
            final = publisher.stamp(turn_event.to_dict())
    finally:
        await publisher.drain()  # every event is in the buffer and the group before the notice
    removed = stream.final_event is not None and stream.final_event.conversation_id is None
    await _publish(
        owner,
        {
            "type": "conversation.updated",
            "conversation_id": public,
            "title": "" if removed else stream.conversation_title,
            "removed": removed,
        },
    )
    return {
        "status": "done",
        "message_id": message_id,
        "finish_reason": final.get("finish_reason"),
        "finish_category": final.get("finish_category"),
        "event": final.get("type"),
    }


@task()
def resume_approvals(message_id: int) -> dict[str, Any]:
    """The task: resume the paused reply ``message_id`` (:func:`run_resume`) in a worker."""
    result: dict[str, Any] = async_to_sync(run_resume)(message_id)
    return result
