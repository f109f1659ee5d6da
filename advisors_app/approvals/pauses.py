"""Tool-call approvals around a turn: the rows a pause leaves, and the checks a resume passes.

The engine pauses (``ToolCallingAdvisor``: finish reason ``APPROVAL_REQUIRED``) and resumes
(decisions in the request context); chat memory stores the paused tool-call message and, on a
resume, the decided round. This module is the Django side, called by the turn
(:mod:`advisors_app.turn`: its ``open`` stage and a ``finish`` hook) in its two thread hops:

* :func:`open_resume` (before the chain runs): the conversation's pending
  :class:`~advisors_app.models.ToolApproval` rows are read, every decision is checked — one per
  pending call, the approval not expired, the caller allowed to decide it, the stored call's
  arguments unchanged since the pause (hash), and the decision allowed by the chain's policy for
  the **final** arguments (an edit is checked again) — and the rows are claimed in one
  conditional ``UPDATE``, so two resumes of one pause never both run it. Refusals are
  :class:`~advisors_app.turn.events.TurnError` with field errors under ``decisions``; nothing
  changes, but the refused attempt counts against the caller's chat rate
  (:mod:`advisors_app.turn.throttling`), so a refused resume cannot be retried for free.
* :func:`record_turn` (in the turn's one transaction): a paused turn's calls become pending rows;
  a resumed turn links its rows to its call log and rewrites the paused message as it ran
  (edited arguments, no longer flagged pending); a new message instead of a decision expires the
  conversation's pending rows (memory answered them for the model as not executed).

Decisions made outside a turn (the admin, ``POST /api/approvals/<id>/decision/``) are recorded on
the row by :func:`record_decision` and, once every call of the paused reply has one, resumed by a
task (:mod:`advisors_app.approvals.jobs`) that runs the turn for its owner, inside
:func:`replaying_recorded`.

Who may resume (issue 36): a resume sends a decision for every waiting call, and the caller must
be allowed to decide each (:meth:`~advisors_app.models.ToolApproval.may_decide`, the check the
admin and the approvals API make) — a decision an approver recorded too: carrying it is deciding
the turn's next step, so an owner who may not decide cannot send it (the worker runs it). The
worker's resume is the one exception: it runs the recorded decisions, as recorded, for an owner
who may not decide them, checked against who recorded them. A ``grant`` extends a decision to
the rest of the conversation, so it needs the same right, always; the worker never asks one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from advisors_app.conf import app_settings
from advisors_app.core.memory import APPROVAL_PENDING
from advisors_app.core.messages import Message
from advisors_app.core.tools.approval import (
    ApprovalDecision,
    ToolCallDecision,
    ToolCallDecisionError,
)
from advisors_app.models import ChatMessage, ToolApproval, ToolApprovalGrant
from advisors_app.models.approvals import arguments_hash
from advisors_app.stores.memory import _message as _stored_row_message
from advisors_app.turn.events import TurnError
from advisors_app.turn.input import Decision, parse_decision
from advisors_app.turn.throttling import count_chat_turn

__all__ = [
    "Resume",
    "active_grants",
    "open_resume",
    "record_decision",
    "record_turn",
    "replaying_recorded",
]

_STATUS = {
    ApprovalDecision.APPROVE: ToolApproval.Status.APPROVED,
    ApprovalDecision.EDIT: ToolApproval.Status.EDITED,
    ApprovalDecision.REJECT: ToolApproval.Status.REJECTED,
}
#: The metadata key of the decisions recorded on a resumed tool-call message.
DECISIONS_METADATA = "tool_call_decisions"
#: The paused message whose recorded decisions this context resumes (the approvals worker's
#: resume; ``None``: a caller's). A context variable, not a turn input: no request can set it.
_replaying: ContextVar[int | None] = ContextVar("advisors_replaying_recorded", default=None)


@contextmanager
def replaying_recorded(message_id: int) -> Iterator[None]:
    """Within the block, a resume of the paused message ``message_id`` runs the decisions
    recorded on its calls for an owner who may not decide them (the approvals worker's resume:
    :func:`advisors_app.approvals.jobs.run_resume`); the turn opened inside it inherits this
    (thread hops copy the context)."""
    token = _replaying.set(message_id)
    try:
        yield
    finally:
        _replaying.reset(token)


@dataclass
class Resume:
    """A checked and claimed resume: the decisions the chain runs and the rows they decide."""

    decisions: tuple[ToolCallDecision, ...]
    #: The claimed rows, each with its ``message`` (the paused tool-call message) loaded.
    rows: list[ToolApproval]
    granted: list[str] = field(default_factory=list)


def _invalid(*problems: str) -> TurnError:
    return TurnError("invalid", "The request is invalid.", errors={"decisions": list(problems)})


def _stored_call(message: ChatMessage, approval_id: str) -> dict[str, Any] | None:
    return next((c for c in message.tool_calls if c.get("id") == approval_id), None)


def _stored_message(message: ChatMessage) -> Message:
    """The stored tool-call message as the engine reads it from memory."""
    return _stored_row_message(
        message.message_type, message.text, dict(message.metadata), message.tool_calls, [], []
    )


def active_grants(conversation_pk: int) -> list[str]:
    """The tools allowed for the rest of conversation ``conversation_pk`` (blocking)."""
    return list(
        ToolApprovalGrant.objects.filter(
            conversation_id=conversation_pk, revoked_at__isnull=True
        ).values_list("tool", flat=True)
    )


def _pending_rows(conversation_pk: int) -> list[ToolApproval]:
    return list(
        ToolApproval.objects.filter(
            conversation_id=conversation_pk, status=ToolApproval.Status.PENDING
        )
        .select_related("message", "decided_by")
        .order_by("pk")
    )


def open_resume(
    user: Any,
    conversation_pk: int | None,
    decisions: tuple[Decision, ...],
    compiled: Any,
    granted: list[str],
) -> list[ToolApproval]:
    """Check ``decisions`` against the conversation's pending calls (blocking; see the module
    docstring); the pending rows they decide. Claim them afterwards with :func:`claim`.

    A refusal counts against ``user``'s chat rate, as a turn that ran would: past the rate it
    is ``throttled`` (429) instead."""
    try:
        return _checked_resume(user, conversation_pk, decisions, compiled, granted)
    except TurnError:
        count_chat_turn(user)
        raise


def _checked_resume(
    user: Any,
    conversation_pk: int | None,
    decisions: tuple[Decision, ...],
    compiled: Any,
    granted: list[str],
) -> list[ToolApproval]:
    rows = _pending_rows(conversation_pk) if conversation_pk is not None else []
    if not rows:
        raise _invalid("This conversation has no tool calls waiting for a decision.")
    by_id = {row.approval_id: row for row in rows}
    sent = {d.decision.approval_id: d for d in decisions}
    problems = [
        f"{approval_id!r} is not a call waiting for a decision in this conversation."
        for approval_id in sent
        if approval_id not in by_id
    ]
    problems += [
        f"Decide {approval_id!r} ({row.tool}) too: every waiting call needs a decision."
        for approval_id, row in by_id.items()
        if approval_id not in sent
    ]
    if problems:
        raise _invalid(*problems)
    now = timezone.now()
    expired = [row for row in rows if row.expires_at <= now]
    if expired:
        ToolApproval.objects.filter(pk__in=[r.pk for r in expired]).update(
            status=ToolApproval.Status.EXPIRED
        )
        raise _invalid(
            *(
                f"The approval of {r.approval_id!r} ({r.tool}) expired at "
                f"{r.expires_at:%Y-%m-%d %H:%M} UTC."
                for r in expired
            )
        )
    # A decision recorded outside the turn (an approver's) stands: a resume must carry it as
    # recorded, and who made it must still be allowed to (the caller too: _decider_refusal).
    for row in rows:
        if row.decided_at is not None and _recorded(row) != sent[row.approval_id].decision:
            who = row.decided_by.get_username() if row.decided_by else "someone"
            raise TurnError(
                "conflict",
                f"{who} decided {row.approval_id!r} ({row.tool}) already: {row.decision}. "
                "The turn resumes from that decision.",
                http_status=409,
            )
    replaying = _replaying.get()
    for row in rows:
        refusal = _decider_refusal(row, sent[row.approval_id], user, row.message_id == replaying)
        if refusal is not None:
            raise TurnError("permission_denied", refusal, http_status=403)
    message = rows[0].message
    for row in rows:
        stored = _stored_call(message, row.approval_id)
        if stored is None or arguments_hash(stored.get("arguments", "{}")) != row.arguments_hash:
            raise TurnError(
                "conflict",
                f"The call {row.approval_id!r} changed since it paused; it cannot be decided.",
                http_status=409,
            )
    core = tuple(d.decision for d in decisions)
    manager = compiled.tool_calling_manager
    if manager is None:
        raise _invalid("This chain version runs no tools: its paused calls cannot resume.")
    try:
        manager.check_decisions(_stored_message(message), compiled.tool_options, core, granted)
    except ToolCallDecisionError as exc:
        raise _invalid(str(exc)) from None
    return rows


def _decider_refusal(row: ToolApproval, sent: Decision, user: Any, replaying: bool) -> str | None:
    """Why ``user`` may not resume ``row`` with ``sent`` (``None``: they may; see the module
    docstring). ``replaying``: this is the worker's resume of the decision recorded on it."""
    recorded = row.decided_at is not None
    who = row.decided_by.get_username() if row.decided_by else "Someone"
    call = f"{row.approval_id!r} ({row.tool})"
    if recorded and not row.may_decide(row.decided_by):
        return f"{who} decided {call} but may not decide it any more: it cannot run."
    if row.may_decide(user) or (recorded and replaying and not sent.grant):
        return None
    if sent.grant:
        return (
            f"You may not decide {call}, so you may not allow {row.tool!r} for this "
            "conversation either."
        )
    if recorded:
        return (
            f"{who} decided {call}, and you may not decide it: the turn resumes from that "
            "decision without you."
        )
    return "You may not decide these tool calls."


def _recorded(row: ToolApproval) -> ToolCallDecision:
    """The decision recorded on ``row`` outside a turn."""
    return ToolCallDecision(
        row.approval_id,
        row.decision,
        row.decided_arguments if row.decision == ApprovalDecision.EDIT.value else None,
        row.decision_reason or None,
    )


def forget_decisions(message_id: int) -> None:
    """Clear the decisions recorded outside a turn on the pending calls of message
    ``message_id`` (blocking): their resume was refused, so they can be decided again."""
    ToolApproval.objects.filter(message_id=message_id, status=ToolApproval.Status.PENDING).update(
        decision="",
        decided_by=None,
        decided_at=None,
        decision_reason="",
        decided_arguments=None,
    )


def claim(user: Any, rows: list[ToolApproval], decisions: tuple[Decision, ...]) -> Resume:
    """Record ``decisions`` on ``rows`` (:func:`open_resume`'s) with one conditional
    ``UPDATE`` per row, inside the caller's transaction (blocking); ``TurnError`` (409) when
    another request decided them since. Grants asked for are created, for a ``user`` who may
    decide their call (:func:`open_resume` refused the others already; this is where a grant is
    written, so it holds here too)."""
    now = timezone.now()
    by_id = {row.approval_id: row for row in rows}
    asked = [
        by_id[d.decision.approval_id]
        for d in decisions
        if d.grant and d.decision.approval_id in by_id
    ]
    if not all(row.may_decide(user) for row in asked):
        raise TurnError(
            "permission_denied",
            "You may not allow a tool you may not decide for this conversation.",
            http_status=403,
        )
    claimed = 0
    for item in decisions:
        decision = item.decision
        row = by_id.get(decision.approval_id)
        if row is None:
            break
        row.status = _STATUS[decision.decision]
        row.decision = decision.decision.value
        row.decided_by_id = row.decided_by_id or user.pk
        row.decided_at = row.decided_at or now
        row.decision_reason = decision.reason or ""
        row.decided_arguments = (
            json.loads(decision.arguments) if decision.arguments is not None else None
        )
        claimed += ToolApproval.objects.filter(
            pk=row.pk, status=ToolApproval.Status.PENDING
        ).update(
            status=row.status,
            decision=row.decision,
            decided_by_id=row.decided_by_id,
            decided_at=row.decided_at,
            decision_reason=row.decision_reason,
            decided_arguments=row.decided_arguments,
        )
    if claimed != len(decisions) or not rows:
        raise TurnError(
            "conflict", "These tool calls were decided by another request.", http_status=409
        )
    granted = [row.tool for row in asked]
    for tool in dict.fromkeys(granted):
        ToolApprovalGrant.objects.get_or_create(
            conversation_id=rows[0].conversation_id,
            tool=tool,
            revoked_at=None,
            defaults={"granted_by_id": user.pk},
        )
    return Resume(tuple(d.decision for d in decisions), rows, list(granted))


def record_turn(
    *,
    user: Any,
    chain_slug: str,
    conversation_pk: int | None,
    message_id: int | None,
    call_log: Any,
    pending: list[dict[str, Any]],
    resume: Resume | None,
    ran: list[dict[str, Any]],
    approver_permission: str,
) -> list[dict[str, Any]]:
    """What a turn of a chain that may pause changes of its conversation's approvals, in the
    caller's transaction (blocking); the pending calls as the outcome reports them (``[]``:
    none). ``conversation_pk`` is ``None`` when the turn stored nothing.

    ``pending`` is the paused reply's ``pending_approvals`` (empty unless it paused and was
    stored as ``message_id``), ``ran`` the resumed round as the engine reports it
    (``Message.to_dict()`` dicts: the tool-call message as run, then its responses)."""
    if resume is not None:
        _finish_resume(resume, call_log, ran)
    elif conversation_pk is not None:
        # A new message instead of a decision: memory answered the calls as not executed.
        ToolApproval.objects.filter(
            conversation_id=conversation_pk, status=ToolApproval.Status.PENDING
        ).update(status=ToolApproval.Status.EXPIRED)
    if not pending or message_id is None or conversation_pk is None:
        return []
    expires = timezone.now() + timedelta(seconds=app_settings.APPROVAL_TTL_SECONDS)
    rows = ToolApproval.objects.bulk_create(
        [
            ToolApproval(
                user_id=user.pk,
                chain_slug=chain_slug,
                conversation_id=conversation_pk,
                message_id=message_id,
                call_log=call_log,
                approval_id=item["approval_id"],
                tool=item["tool"],
                arguments=item["arguments"],
                arguments_hash=arguments_hash(_model_arguments(item["arguments"])),
                reason_text=item.get("reason", ""),
                allowed_decisions=list(item.get("allowed_decisions", ())),
                approver_permission=approver_permission,
                expires_at=expires,
            )
            for item in pending
        ]
    )
    return [row.to_pending() for row in rows]


def _model_arguments(arguments: Any) -> str:
    """The argument text as the model's stored call holds it (see ``_stored_call``)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments)


def _finish_resume(resume: Resume, call_log: Any, ran: list[dict[str, Any]]) -> None:
    ToolApproval.objects.filter(pk__in=[row.pk for row in resume.rows]).update(
        resumed_call_log=call_log
    )
    message = resume.rows[0].message  # loaded with the rows; the turn only appended after it
    as_run = next((m for m in ran if m.get("type") == "assistant"), None)
    if as_run is not None and as_run.get("tool_calls"):
        message.tool_calls = as_run["tool_calls"]
    message.metadata = {
        **message.metadata,
        APPROVAL_PENDING: False,
        DECISIONS_METADATA: [d.to_dict() for d in resume.decisions],
    }
    message.save(update_fields=["tool_calls", "metadata"])


def record_decision(approval: ToolApproval, user: Any, decision: ToolCallDecision) -> bool:
    """Record ``user``'s decision on a pending call outside a turn (the admin, the approvals
    API; blocking); whether every call of its paused reply is now decided (then resume it:
    :func:`advisors_app.approvals.jobs.enqueue_resume`). Raises ``PermissionError`` when
    ``user`` may not decide it, ``ValueError`` when it is no longer pending, has expired, or
    the decision is not one its policy allows."""
    if not approval.may_decide(user):
        raise PermissionError("You may not decide this tool call.")
    if approval.status != ToolApproval.Status.PENDING:
        raise ValueError(f"This call is {approval.get_status_display().lower()} already.")
    if approval.expired:
        approval.status = ToolApproval.Status.EXPIRED
        approval.save(update_fields=["status"])
        raise ValueError("This approval has expired.")
    try:  # what a resume would refuse, refused now: a recorded decision must be able to run
        parse_decision(decision.to_dict())
    except (ToolCallDecisionError, ValueError) as exc:
        raise ValueError(str(exc)) from None
    if decision.decision.value not in approval.allowed_decisions:
        allowed = ", ".join(approval.allowed_decisions)
        raise ValueError(
            f"Decision {decision.decision.value!r} is not allowed; allowed: {allowed}."
        )
    with transaction.atomic():
        updated = ToolApproval.objects.filter(
            pk=approval.pk, status=ToolApproval.Status.PENDING, decided_at__isnull=True
        ).update(
            decided_by_id=user.pk,
            decided_at=timezone.now(),
            decision_reason=decision.reason or "",
            decided_arguments=(
                json.loads(decision.arguments) if decision.arguments is not None else None
            ),
            decision=decision.decision.value,
        )
        if not updated:
            raise ValueError("This call was decided by someone else meanwhile.")
        return not ToolApproval.objects.filter(
            message_id=approval.message_id,
            status=ToolApproval.Status.PENDING,
            decided_at__isnull=True,
        ).exists()
