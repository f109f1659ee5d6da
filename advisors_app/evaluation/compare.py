"""Two evaluation runs side by side: what regressed, improved or stayed (issue 22, "Compare").

:func:`compare_runs` matches a **baseline** run and a **candidate** run by item key. Per item
and score key, the delta is candidate minus baseline of the score as a number — a boolean is
1/0, a number itself; a label is no number, so a change of label counts through ``passed``
only —, and a pass turning into a fail (or back) counts even when the values do not say so.
Higher is better for every score (the built-in evaluators score so: a latency or cost
threshold passes or fails). An item **regressed** when any of its scores went down or from
pass to fail, **improved** when some went up and none down, else it is **unchanged**; items of
one run only are listed apart (``only_baseline``, ``only_candidate``), as are items whose
turn failed in either run (they count as regressions when the candidate failed and the
baseline did not).

A run that repeats its items (``EvalRun.repeats``) has several results per item: an item's
score is then the mean of its repeats' numbers, its pass rate that of its judged repeats, and
it regressed when either went down (or its turn failed in more of the candidate's repeats).

Per score key, the aggregate delta is the mean of the paired deltas over the items both runs
scored, with a paired bootstrap 95 % interval: :data:`RESAMPLES` resamples of the items with
replacement (numpy, a fixed ``seed``, so the same runs always give the same interval), the 2.5th
and 97.5th percentiles of the resampled means. The item is the unit resampled — its repeats
are averaged first, as they are no independent cases. ``None`` where no item has both values.
The gate (:mod:`advisors_app.evaluation.gate`) decides on that interval.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from advisors_app.models import EvalResult, EvalRun

__all__ = [
    "IMPROVED",
    "REGRESSED",
    "RESAMPLES",
    "UNCHANGED",
    "Comparison",
    "ItemComparison",
    "ScoreComparison",
    "bootstrap_interval",
    "compare_runs",
]

REGRESSED = "regressed"
IMPROVED = "improved"
UNCHANGED = "unchanged"
#: Bootstrap resamples per score key.
RESAMPLES = 2000
#: Differences smaller than this are no change (floating-point noise of a mean).
TOLERANCE = 1e-9


@dataclass(frozen=True)
class ItemComparison:
    """One item in both runs: ``deltas`` per score key (``None``: not comparable), the
    ``status``, and the scores and errors of each side."""

    key: str
    status: str
    deltas: dict[str, float | None]
    baseline: dict[str, Any]
    candidate: dict[str, Any]
    baseline_error: str = ""
    candidate_error: str = ""
    #: The score keys that went down (or from pass to fail).
    regressed: list[str] = field(default_factory=list)
    improved: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScoreComparison:
    """One score key over the matched items."""

    key: str
    baseline_mean: float | None
    candidate_mean: float | None
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    #: Items with both values (what ``delta`` and the interval are over).
    paired: int
    regressed: int
    improved: int
    unchanged: int
    baseline_pass_rate: float | None = None
    candidate_pass_rate: float | None = None


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare_runs` found (see the module docstring)."""

    baseline: int
    candidate: int
    items: list[ItemComparison]
    scores: dict[str, ScoreComparison]
    only_baseline: list[str]
    only_candidate: list[str]
    seed: int
    resamples: int

    @property
    def regressed(self) -> list[ItemComparison]:
        return [item for item in self.items if item.status == REGRESSED]

    @property
    def improved(self) -> list[ItemComparison]:
        return [item for item in self.items if item.status == IMPROVED]

    @property
    def unchanged(self) -> list[ItemComparison]:
        return [item for item in self.items if item.status == UNCHANGED]

    def counts(self) -> dict[str, int]:
        return {
            REGRESSED: len(self.regressed),
            IMPROVED: len(self.improved),
            UNCHANGED: len(self.unchanged),
            "only_baseline": len(self.only_baseline),
            "only_candidate": len(self.only_candidate),
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON of the comparison (the API's body)."""
        return {
            "baseline": self.baseline,
            "candidate": self.candidate,
            "counts": self.counts(),
            "scores": {key: asdict(score) for key, score in self.scores.items()},
            "items": [asdict(item) for item in self.items],
            "only_baseline": self.only_baseline,
            "only_candidate": self.only_candidate,
            "bootstrap": {"resamples": self.resamples, "seed": self.seed, "confidence": 0.95},
        }


def _number(score: Any) -> float | None:
    if not isinstance(score, dict):
        return None
    value = score.get("value")
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def _passed(score: Any) -> bool | None:
    return score.get("passed") if isinstance(score, dict) else None


def bootstrap_interval(
    deltas: list[float], *, resamples: int = RESAMPLES, seed: int = 0
) -> tuple[float, float] | None:
    """The 95 % bootstrap interval of the mean of ``deltas`` (``None`` when empty)."""
    if not deltas:
        return None
    values = np.asarray(deltas, dtype=float)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(values), size=(resamples, len(values)))
    means = values[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rate(values: Sequence[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def _numbers(results: Iterable[EvalResult], score_key: str) -> list[float]:
    return [v for r in results if (v := _number(r.scores.get(score_key))) is not None]


def _judged(results: Iterable[EvalResult], score_key: str) -> list[bool]:
    return [bool(p) for r in results if (p := _passed(r.scores.get(score_key))) is not None]


def _shown_scores(results: Sequence[EvalResult]) -> dict[str, Any]:
    """An item's scores as shown: its one result's, or per key over its repeats the mean
    value (else the first label), ``passed`` when every judged repeat passed, and a comment
    counting them."""
    if len(results) == 1:
        return results[0].scores
    shown: dict[str, Any] = {}
    for score_key in sorted({k for r in results for k in r.scores}):
        number = _mean(_numbers(results, score_key))
        labels = [
            score.get("value")
            for r in results
            if isinstance(score := r.scores.get(score_key), dict) and _number(score) is None
        ]
        judged = _judged(results, score_key)
        shown[score_key] = {
            "value": round(number, 6) if number is not None else next(iter(labels), None),
            "passed": all(judged) if judged else None,
            "comment": f"{len(results)} repeats, {sum(judged)} of {len(judged)} judged passed",
        }
    return shown


def _first_error(results: Sequence[EvalResult]) -> str:
    return next((r.error for r in results if r.error), "")


def _compare_item(
    key: str, base: Sequence[EvalResult], cand: Sequence[EvalResult]
) -> ItemComparison:
    deltas: dict[str, float | None] = {}
    regressed: list[str] = []
    improved: list[str] = []
    for score_key in sorted({k for r in (*base, *cand) for k in r.scores}):
        b, a = _mean(_numbers(base, score_key)), _mean(_numbers(cand, score_key))
        delta = a - b if a is not None and b is not None else None
        deltas[score_key] = delta
        was, now = _rate(_judged(base, score_key)), _rate(_judged(cand, score_key))
        fell = was is not None and now is not None and now < was - TOLERANCE
        rose = was is not None and now is not None and now > was + TOLERANCE
        if (delta is not None and delta < -TOLERANCE) or fell:
            regressed.append(score_key)
        elif (delta is not None and delta > TOLERANCE) or rose:
            improved.append(score_key)
    base_errors = sum(bool(r.error) for r in base) / len(base)
    cand_errors = sum(bool(r.error) for r in cand) / len(cand)
    if cand_errors > base_errors:
        regressed.append("error")
    elif base_errors > cand_errors:
        improved.append("error")
    status = REGRESSED if regressed else IMPROVED if improved else UNCHANGED
    return ItemComparison(
        key=key,
        status=status,
        deltas=deltas,
        baseline=_shown_scores(base),
        candidate=_shown_scores(cand),
        baseline_error=_first_error(base),
        candidate_error=_first_error(cand),
        regressed=regressed,
        improved=improved,
    )


def _by_item(run: EvalRun) -> dict[str, list[EvalResult]]:
    """A run's results per item key, in repeat order."""
    grouped: dict[str, list[EvalResult]] = defaultdict(list)
    for result in run.results.order_by("item_key", "repeat"):
        grouped[result.item_key].append(result)
    return dict(grouped)


def compare_runs(
    baseline: EvalRun, candidate: EvalRun, *, seed: int = 0, resamples: int = RESAMPLES
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` item by item (see the module docstring)."""
    base, cand = _by_item(baseline), _by_item(candidate)
    shared = sorted(set(base) & set(cand))
    items = [_compare_item(key, base[key], cand[key]) for key in shared]
    every_base = [r for results in base.values() for r in results]
    every_cand = [r for results in cand.values() for r in results]
    score_keys = sorted({k for r in (*every_base, *every_cand) for k in r.scores})
    scores: dict[str, ScoreComparison] = {}
    for score_key in score_keys:
        paired = [
            (b, a)
            for key in shared
            if (b := _mean(_numbers(base[key], score_key))) is not None
            and (a := _mean(_numbers(cand[key], score_key))) is not None
        ]
        deltas = [a - b for b, a in paired]
        interval = bootstrap_interval(deltas, resamples=resamples, seed=seed)
        scores[score_key] = ScoreComparison(
            key=score_key,
            baseline_mean=_mean(_numbers(every_base, score_key)),
            candidate_mean=_mean(_numbers(every_cand, score_key)),
            delta=_mean(deltas),
            ci_low=interval[0] if interval else None,
            ci_high=interval[1] if interval else None,
            paired=len(paired),
            regressed=sum(score_key in item.regressed for item in items),
            improved=sum(score_key in item.improved for item in items),
            unchanged=sum(
                score_key not in item.regressed and score_key not in item.improved
                for item in items
                if score_key in item.deltas
            ),
            baseline_pass_rate=_rate(_judged(every_base, score_key)),
            candidate_pass_rate=_rate(_judged(every_cand, score_key)),
        )
    return Comparison(
        baseline=baseline.pk,
        candidate=candidate.pk,
        items=items,
        scores=scores,
        only_baseline=sorted(set(base) - set(cand)),
        only_candidate=sorted(set(cand) - set(base)),
        seed=seed,
        resamples=resamples,
    )
