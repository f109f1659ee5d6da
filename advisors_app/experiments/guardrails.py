"""Guardrails: a running experiment's arms checked against the control, on the task queue.

A guardrail ``{"metric", "max"|"min"}`` bounds the difference arm − control of a metric of
:data:`~.results.METRICS` (``{"metric": "error_rate", "max": 0.02}``: at most 2 points more
errors than the control). Each server process counts the turns an experiment serves (the
``after_commit`` hook :func:`count_turn`, no SQL) and queues :data:`check_guardrails` after
``ADVISORS["EXPERIMENT_CHECK_TURNS"]`` of them or ``EXPERIMENT_CHECK_SECONDS`` after the last
it queued. The task reads the figures per arm in one statement (:func:`~.results.arm_figures`)
and runs the mSPRT of :mod:`.stats` on every guardrail of every arm with at least
``EXPERIMENT_MIN_TURNS`` turns (and the control too). A guardrail trips when its statistic
reaches ``1 / EXPERIMENT_ALPHA`` with the difference beyond the bound: the experiment is paused
(every unit back on the control arm's version, :mod:`.serving`), the pause recorded as an
:class:`~advisors_app.models.ExperimentEvent` with the reason and the statistic, and
``experiment_paused`` sent (:mod:`.signals`).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

from advisors_app.conf import app_settings
from advisors_app.experiments.ramps import advance
from advisors_app.experiments.results import METRICS, arm_figures
from advisors_app.experiments.stats import beyond_bound
from advisors_app.experiments.status import change_status
from advisors_app.models import Experiment

try:
    from django.tasks import task  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

__all__ = ["check", "check_guardrails", "count_turn", "default_tau"]

logger = logging.getLogger(__name__)

#: The mixture's standard deviation for a rate (5 points: differences of that order are what
#: the test is most sensitive to).
RATE_TAU = 0.05


def default_tau(kind: str, control_sd: float | None) -> float:
    """The mixture standard deviation of a guardrail: :data:`RATE_TAU` for a rate, half the
    control's standard deviation for a mean (its own unit)."""
    if kind == "rate":
        return RATE_TAU
    return max((control_sd or 0.0) / 2, 1e-9)


def _breach(rail: dict[str, Any], arm: Any, control: Any, alpha: float) -> dict[str, Any] | None:
    """The guardrail's verdict on one arm, if it trips."""
    metric = rail["metric"]
    mine, theirs = arm[metric], control[metric]
    if mine.value is None or theirs.value is None or mine.se is None or theirs.se is None:
        return None
    d = mine.value - theirs.value
    variance = mine.se**2 + theirs.se**2
    upper = "max" in rail
    bound = float(rail["max"] if upper else rail["min"])
    control_sd = theirs.se * math.sqrt(theirs.n) if theirs.n else None
    tau = float(rail.get("tau") or default_tau(METRICS[metric], control_sd))
    trips, statistic = beyond_bound(d, variance, bound, upper=upper, tau=tau, alpha=alpha)
    if not trips:
        return None
    return {
        "metric": metric,
        "bound": {"max" if upper else "min": bound},
        "difference": d,
        "arm_value": mine.value,
        "control_value": theirs.value,
        "statistic": statistic if math.isfinite(statistic) else None,
        "threshold": 1 / alpha,
        "method": "mSPRT",
        "tau": tau,
    }


def check(experiment: Experiment) -> dict[str, Any] | None:
    """Blocking: check a running experiment's guardrails (one statement for the figures);
    pause it when one trips, else move its ramp on when the step is done
    (:func:`~.ramps.advance`). The breach, or ``None``."""
    if experiment.status != Experiment.Status.RUNNING:
        return None
    arms = list(experiment.arms.order_by("position").values_list("name", flat=True))
    breach = _guard(experiment, arms) if experiment.guardrails else None
    if breach is None and experiment.ramp:
        advance(experiment, arms)
    return breach


def _guard(experiment: Experiment, arms: list[str]) -> dict[str, Any] | None:
    figures = arm_figures(experiment.pk)
    control = figures.get(arms[0])
    minimum = app_settings.EXPERIMENT_MIN_TURNS
    if control is None or control["turns"] < minimum:
        return None
    for name in arms[1:]:
        arm = figures.get(name)
        if arm is None or arm["turns"] < minimum:
            continue
        for rail in experiment.guardrails:
            breach = _breach(rail, arm, control, app_settings.EXPERIMENT_ALPHA)
            if breach is None:
                continue
            breach = {"arm": name, "control": arms[0], **breach}
            reason = (
                f"guardrail {breach['metric']} tripped on arm {name!r}: difference "
                f"{breach['difference']:+.4g} beyond {rail!r} (mSPRT, alpha "
                f"{app_settings.EXPERIMENT_ALPHA:g}); every unit back on {arms[0]!r}"
            )
            paused = change_status(
                experiment,
                Experiment.Status.PAUSED,
                reason=reason,
                detail=breach,
                expect=Experiment.Status.RUNNING,
            )
            if paused:
                logger.warning("Experiment %s paused: %s", experiment.pk, reason)
            return breach
    return None


@task()
def check_guardrails(experiment_id: int) -> dict[str, Any] | None:
    """The task: :func:`check` on the experiment as stored now."""
    experiment = Experiment.objects.filter(pk=experiment_id).first()
    return check(experiment) if experiment is not None else None


class _Counter:
    """Turns served per experiment in this process since its last queued check."""

    def __init__(self) -> None:
        self.turns: dict[int, int] = {}
        self.queued_at: dict[int, float] = {}
        self.lock = threading.Lock()

    def due(self, experiment_id: int) -> bool:
        now = time.monotonic()
        with self.lock:
            turns = self.turns[experiment_id] = self.turns.get(experiment_id, 0) + 1
            since = now - self.queued_at.setdefault(experiment_id, now)
            if turns < app_settings.EXPERIMENT_CHECK_TURNS and (
                since < app_settings.EXPERIMENT_CHECK_SECONDS
            ):
                return False
            self.turns[experiment_id] = 0
            self.queued_at[experiment_id] = now
            return True


_counter = _Counter()


def count_turn(finished: Any) -> None:
    """The ``after_commit`` hook: count a turn an experiment served; queue a check when due."""
    arm = finished.turn.target.arm
    if arm is not None and _counter.due(arm[0]):
        check_guardrails.enqueue(arm[0])
