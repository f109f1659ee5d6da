"""Ramps: the candidate arms' share of units grows step by step while the guardrails hold.

``Experiment.ramp`` is ``{"steps": [100, 500, 2500, 5000], "min_turns": 200}``: at step *k* the
candidate arms (all but the control) get ``steps[k]`` basis points of the units together, split
between them by their weights, and the control the rest (:func:`effective_weights`, used by the
turns' plan, :mod:`.serving`). The guardrail task (:mod:`.guardrails`) advances a running
experiment one step (:func:`advance`) when no guardrail tripped and every arm served at least
``min_turns`` turns since the step began; the last step is where it stays. Buckets run from the
control's end, so a growing candidate share moves units from the control to the candidates and
never back; conversations keep their arm anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from advisors_app.models import CallLog, Experiment, ExperimentEvent
from advisors_app.models.experiments import BASIS_POINTS

__all__ = ["advance", "effective_weights", "ramp_errors"]


def ramp_errors(ramp: Any) -> list[str]:
    """What is wrong with a ``ramp`` value (empty: nothing; ``{}`` is no ramp)."""
    if ramp in ({}, None):
        return []
    if not isinstance(ramp, dict) or set(ramp) - {"steps", "min_turns"}:
        return ['Enter {"steps": [basis points, ...], "min_turns": n}.']
    steps, minimum = ramp.get("steps"), ramp.get("min_turns", 100)
    ints = isinstance(steps, list) and all(
        isinstance(s, int) and not isinstance(s, bool) for s in steps
    )
    if not ints or not steps or any(b <= a for a, b in pairwise(steps)):
        return ["'steps' must be increasing whole basis points."]
    if steps[0] <= 0 or steps[-1] >= BASIS_POINTS:
        return [f"Each step must be above 0 and below {BASIS_POINTS} (the control keeps some)."]
    if isinstance(minimum, bool) or not isinstance(minimum, int) or minimum < 1:
        return ["'min_turns' must be a whole number of turns, at least 1."]
    return []


def effective_weights(weights: Sequence[int], ramp: Any, step: int) -> list[int]:
    """The arms' weights at ``step`` of ``ramp`` (the control first); ``weights`` without one."""
    steps = (ramp or {}).get("steps")
    candidates = sum(weights[1:])
    if not steps or candidates <= 0:
        return list(weights)
    share = steps[min(step, len(steps) - 1)]
    scaled = [weight * share // candidates for weight in weights[1:]]
    scaled[-1] += share - sum(scaled)  # rounding goes to the last candidate
    return [BASIS_POINTS - share, *scaled]


def advance(experiment: Experiment, arm_names: Sequence[str]) -> bool:
    """Blocking: move a running experiment's ramp one step when every arm served the step's
    ``min_turns`` since it began (one query); recorded as an event. Whether it moved."""
    steps = (experiment.ramp or {}).get("steps") or []
    if experiment.status != Experiment.Status.RUNNING or experiment.ramp_step >= len(steps) - 1:
        return False
    minimum = int(experiment.ramp.get("min_turns", 100))
    since = experiment.step_started_at or experiment.started_at
    served = dict(
        CallLog.objects.filter(experiment=experiment, created__gte=since)
        .values_list("experiment_arm")
        .annotate(n=Count("id"))
        .values_list("experiment_arm", "n")
    )
    if any(served.get(name, 0) < minimum for name in arm_names):
        return False
    with transaction.atomic():
        locked = Experiment.objects.select_for_update().get(pk=experiment.pk)
        if locked.status != Experiment.Status.RUNNING or locked.ramp_step != experiment.ramp_step:
            return False
        locked.ramp_step += 1
        locked.step_started_at = timezone.now()
        locked.save(update_fields=["ramp_step", "step_started_at", "updated_at"])
        locked.touch()
        share = steps[locked.ramp_step]
        ExperimentEvent.objects.create(
            experiment=locked,
            from_status=locked.status,
            to_status=locked.status,
            reason=f"ramp step {locked.ramp_step + 1}/{len(steps)}: candidates at "
            f"{share / 100:g} % (guardrails held over {minimum} turns an arm)",
            detail={"ramp_step": locked.ramp_step, "share": share},
        )
    experiment.ramp_step, experiment.revision = locked.ramp_step, locked.revision
    experiment.step_started_at = locked.step_started_at
    return True
