"""The ``after_commit`` hook of online evaluation: which rules sample a turn.

The hook finds the enabled rules of the turn's chain and label in a list of every enabled
rule this process keeps (read in one query, at most :data:`CACHE_SECONDS` old, dropped at once
when a rule is saved or deleted here — as the budgets' list is, :mod:`advisors_app.costs.
budgets`): a turn adds no SQL statement while it is fresh. It draws once per
rule against its ``sample_rate`` with :data:`random` (replace it with a seeded
``random.Random`` in tests) and queues one task per sampled rule. It never affects the user's
turn: it runs after the turn committed, and anything it raises is logged.
"""

from __future__ import annotations

import logging
import random as _random
import threading
import time
from collections.abc import Mapping
from typing import Any

from django.db.models.signals import post_delete, post_save

from advisors_app.models import CallLog, OnlineEvaluation

__all__ = ["CACHE_SECONDS", "clear_rules", "matches", "random", "sample_turn"]

logger = logging.getLogger(__name__)

#: The generator the draws use (module-level so tests can seed it).
random: _random.Random = _random.Random()

#: Filter ``outcome`` values by call-log status.
_OUTCOMES = {CallLog.Status.OK: "complete", CallLog.Status.ERROR: "error"}


#: How long a process keeps the list of enabled rules at most (a rule changed in another
#: process is seen by this one's turns that much later; a change here at once).
CACHE_SECONDS = 5.0

#: ``(read at, {(chain id, label): [(rule id, sample rate, arm, filters)]})``.
_rules: tuple[float, dict[tuple[int, str], list[tuple[Any, ...]]]] | None = None
_lock = threading.Lock()


def clear_rules(**_: Any) -> None:
    """Drop this process's list of enabled rules (on every save or delete of one here)."""
    global _rules
    _rules = None


post_save.connect(clear_rules, sender=OnlineEvaluation, dispatch_uid="online-rules-save")
post_delete.connect(clear_rules, sender=OnlineEvaluation, dispatch_uid="online-rules-delete")


def _enabled_rules() -> dict[tuple[int, str], list[tuple[Any, ...]]]:
    global _rules
    cached = _rules
    if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
        return cached[1]
    with _lock:
        read_at = time.monotonic()
        by_target: dict[tuple[int, str], list[tuple[Any, ...]]] = {}
        rows = OnlineEvaluation.objects.filter(enabled=True).order_by("pk")
        for chain_id, label, *rule in rows.values_list(
            "chain_id", "label", "pk", "sample_rate", "arm", "filters"
        ):
            by_target.setdefault((chain_id, label), []).append(tuple(rule))
        _rules = (read_at, by_target)
    return by_target


def matches(filters: Mapping[str, Any], call_log: CallLog, user: Any, context: Mapping) -> bool:
    """Whether a turn passes a rule's ``filters``: ``outcome`` (``complete``/``error``/
    ``cancelled``), ``groups`` (the user is in one of them), ``params`` (each request context
    value equal)."""
    outcomes = filters.get("outcome")
    if outcomes:
        outcome = _OUTCOMES.get(call_log.status, call_log.status)
        if outcome not in ([outcomes] if isinstance(outcomes, str) else outcomes):
            return False
    groups = filters.get("groups")
    if groups:
        if user is None or not getattr(user, "is_authenticated", False):
            return False
        if not user.groups.filter(name__in=groups).exists():
            return False
    params = filters.get("params") or {}
    return all(context.get(name) == value for name, value in params.items())


def sample_turn(finished: Any) -> None:
    """The ``after_commit`` hook: queue :data:`~.jobs.evaluate_turn` for each sampled rule."""
    try:
        _sample(finished)
    except Exception:  # online evaluation never breaks a user's turn
        logger.exception("Online evaluation: sampling a turn failed")


def _sample(finished: Any) -> None:
    from advisors_app.online.jobs import evaluate_turn

    call_log = finished.call_log
    if finished.messages_failed or finished.message_id is None or not call_log.label:
        return  # nothing stored to judge, or a version asked by number (no label's rules)
    rules = _enabled_rules().get((call_log.chain_id, call_log.label), ())
    for pk, rate, arm, filters in rules:
        if arm and arm != call_log.experiment_arm:
            continue
        if not random.random() < rate:
            continue
        if filters and not matches(filters, call_log, finished.turn.user, finished.turn.context):
            continue
        evaluate_turn.enqueue(pk, call_log.pk, finished.message_id)
