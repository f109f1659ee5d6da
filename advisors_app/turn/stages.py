"""The stages of a turn, and the hooks features plug into them.

A turn runs five stages, in this order, each timed in its trace (``trace["stages"]``: seconds
per stage, see :class:`~advisors_app.turn.state.StageTimes`). A feature adds a hook to a stage
with :func:`add_hook` (in its ``AppConfig.ready``, say), never a branch in the turn's code. Hooks
of a stage run in the order they were added; the built-in ones (below) first.

================  ==============================================================================
stage             hook signature, where it runs, what it may do
================  ==============================================================================
``choose``        ``hook(choice: VersionChoice) -> VersionChoice``: blocking, first in the turn's
                  opening thread hop, before the read trip. Returns the version to read — the
                  one asked for, or another label or number.
``assign``        ``hook(assignment: Assignment) -> ChainTarget``: blocking, in the same hop, right
                  after the read trip (timed with ``open``). Returns the version the turn runs
                  — ``assignment.target``, or another version of the chain — given what was
                  read: the label's active experiment, the caller's conversation. Built in
                  by the app: an experiment's arm (:mod:`advisors_app.experiments.serving`).
``open``          ``hook(opening: Opening) -> None``: blocking, in the same hop, once the input,
                  the version and the caller's conversation are read and checked and before
                  anything is written. Raises a :class:`~advisors_app.exceptions.Refusal` to
                  refuse the turn. Built in: the caller's chat rate
                  (:mod:`advisors_app.turn.throttling`).
``run``           ``hook(turn: Turn) -> None``: on the event loop, right before the chain runs
                  (no blocking work). May add to ``turn.context``, the request context.
``finish``        ``hook(finished: Finished) -> None``: blocking, inside the transaction that
                  writes the turn (its messages, then its call log), or — ``messages_failed`` —
                  the one that writes the call log alone. May write rows of its own and
                  replace ``finished.outcome``. Built in: the turn's costs settled against its
                  budgets (:mod:`advisors_app.costs.metering`), the tool calls it leaves
                  waiting for approval (:func:`advisors_app.approvals.pauses.record_turn`).
``after_commit``  ``hook(finished: Finished) -> None``: blocking, once that transaction
                  committed (``transaction.on_commit``, in the same thread hop); a hook that
                  raises is logged and the turn goes on. Built in: the compaction a session
                  memory asked for, queued as a task
                  (:meth:`~advisors_app.stores.sessions.DjangoSessionRepository.queue_compaction`).
================  ==============================================================================

The values handed over are in :mod:`advisors_app.turn.state`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from advisors_app.approvals.pauses import record_turn
from advisors_app.core.advisors.tool_calling import (
    APPROVAL_REQUIRED,
    PENDING_APPROVALS,
    RESUMED_ROUND,
)
from advisors_app.core.memory import CompactionRequest
from advisors_app.exceptions import TurnError
from advisors_app.models import CallLog
from advisors_app.stores.sessions import DjangoSessionRepository
from advisors_app.turn.state import Assignment, Finished, Opening, VersionChoice
from advisors_app.turn.throttling import chat_turn_wait

__all__ = ["Stage", "add_hook", "assign", "choose", "hooks", "queues", "remove_hook", "run_hooks"]

if TYPE_CHECKING:
    from advisors_app.definition.runtime import ChainTarget

logger = logging.getLogger(__name__)


class Stage(StrEnum):
    """The stages of a turn, in the order they run."""

    CHOOSE = "choose"
    ASSIGN = "assign"
    OPEN = "open"
    RUN = "run"
    FINISH = "finish"
    AFTER_COMMIT = "after_commit"


_hooks: dict[Stage, list[Callable[[Any], Any]]] = {stage: [] for stage in Stage}


def add_hook(stage: Stage | str, hook: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Run ``hook`` in every turn's ``stage`` (signatures in the module docstring), after the
    hooks added before it; returns ``hook``, so it works as a decorator factory's result."""
    _hooks[Stage(stage)].append(hook)
    return hook


def remove_hook(stage: Stage | str, hook: Callable[[Any], Any]) -> None:
    """Stop running ``hook`` in ``stage`` (``ValueError`` if it is not there)."""
    _hooks[Stage(stage)].remove(hook)


def hooks(stage: Stage | str) -> tuple[Callable[[Any], Any], ...]:
    """The hooks of ``stage``, in the order they run."""
    return tuple(_hooks[Stage(stage)])


def choose(choice: VersionChoice) -> VersionChoice:
    """The ``choose`` stage's hooks, each handed the previous one's choice."""
    for hook in _hooks[Stage.CHOOSE]:
        choice = hook(choice)
    return choice


def assign(assignment: Assignment) -> ChainTarget:
    """The ``assign`` stage's hooks, each handed the previous one's target."""
    for hook in _hooks[Stage.ASSIGN]:
        assignment = replace(assignment, target=hook(assignment))
    return assignment.target


def run_hooks(stage: Stage, value: Any) -> None:
    """The hooks of ``stage`` (not ``choose`` or ``assign``) with ``value``; an
    ``after_commit`` hook that raises is logged (the turn is committed), any other's error
    propagates."""
    for hook in _hooks[stage]:
        if stage is not Stage.AFTER_COMMIT:
            hook(value)
            continue
        try:
            hook(value)
        except Exception:
            logger.exception("After-commit hook %r of a turn failed", hook)


# The built-in hooks ----------------------------------------------------------------------


def count_chat_rate(opening: Opening) -> None:
    """Count the turn against its user's chat rate, only now that its input is valid: refused
    requests never use up the rate (``throttled``, 429)."""
    wait = chat_turn_wait(opening.user)
    if wait is not None:
        raise TurnError(
            "throttled",
            f"Too many messages: try again in {math.ceil(wait)} s.",
            http_status=429,
            retry_after=wait,
        )


def settle_costs(finished: Finished) -> None:
    """Book what the turn's model calls cost against the budgets that count it (with the
    messages, or with the call log alone: a rolled-back booking is booked again)."""
    finished.turn.meter.settle()


def record_approvals(finished: Finished) -> None:
    """The approvals the turn leaves (a pause's pending calls, a resume's ran calls), and the
    pending ones in its outcome."""
    turn, outcome = finished.turn, finished.outcome
    if not turn.compiled.may_pause or finished.messages_failed:
        return
    paused = outcome.status == CallLog.Status.OK and outcome.finish_reason == APPROVAL_REQUIRED
    pending = record_turn(
        user=turn.user,
        chain_slug=turn.compiled.slug,
        conversation_pk=finished.conversation_pk,
        message_id=finished.message_id,
        call_log=finished.call_log,
        pending=list(outcome.metadata.get(PENDING_APPROVALS) or ()) if paused else [],
        resume=turn.resume,
        ran=list(outcome.metadata.get(RESUMED_ROUND) or ()),
        approver_permission=turn.compiled.approver_permission,
    )
    finished.outcome = replace(outcome, pending_approvals=pending)


def _queue_of(request: CompactionRequest) -> DjangoSessionRepository | None:
    repository = request.repository
    if isinstance(repository, DjangoSessionRepository) and repository.queues_compaction:
        return repository
    return None


def queues(request: CompactionRequest) -> bool:
    """Whether a session memory's compaction request is queued by :func:`queue_compactions`
    (a repository with a task queue); the turn submits the others once it is stored."""
    return _queue_of(request) is not None


def queue_compactions(finished: Finished) -> None:
    """Queue the compactions the turn's session memory asked for (a committed turn only)."""
    for request in finished.turn.memory.compactions:
        queue = _queue_of(request)
        if queue is not None:
            queue.queue_compaction(request.conversation_id)


add_hook(Stage.OPEN, count_chat_rate)
add_hook(Stage.FINISH, settle_costs)
add_hook(Stage.FINISH, record_approvals)
add_hook(Stage.AFTER_COMMIT, queue_compactions)
