"""The ``after_commit`` hook of online evaluation: which rules sample a turn.

The hook reads the enabled rules of the turn's chain and label in one query (an index-only
lookup: a turn of a chain without rules pays that query and nothing else), draws once per
rule against its ``sample_rate`` with :data:`random` (replace it with a seeded
``random.Random`` in tests) and queues one task per sampled rule. It never affects the user's
turn: it runs after the turn committed, and anything it raises is logged.
"""

from __future__ import annotations

import logging
import random as _random
from collections.abc import Mapping
from typing import Any

from advisors_app.models import CallLog, OnlineEvaluation

__all__ = ["matches", "random", "sample_turn"]

logger = logging.getLogger(__name__)

#: The generator the draws use (module-level so tests can seed it).
random: _random.Random = _random.Random()

#: Filter ``outcome`` values by call-log status.
_OUTCOMES = {CallLog.Status.OK: "complete", CallLog.Status.ERROR: "error"}


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
    rules = OnlineEvaluation.objects.filter(
        chain_id=call_log.chain_id, label=call_log.label, enabled=True
    ).values_list("pk", "sample_rate", "arm", "filters")
    for pk, rate, arm, filters in rules:
        if arm and arm != call_log.experiment_arm:
            continue
        if not random.random() < rate:
            continue
        if filters and not matches(filters, call_log, finished.turn.user, finished.turn.context):
            continue
        evaluate_turn.enqueue(pk, call_log.pk, finished.message_id)
