"""The evaluation gate: is a candidate label's version no worse than the baseline's on a
dataset? (issue 22, "Gate"; issue 40, "A gate that does not flip").

:func:`run_gate` resolves both labels to the versions they point at now, gets a finished run of
each on the dataset — **reusing** the newest done run of that version with the same evaluators,
pinned chat options and repeats whose dataset is unchanged since (no item version started or
ended after the run's ``as_of``), else running one synchronously
(:mod:`advisors_app.evaluation.runs`: temperature 0 and a seed pinned, each item ``repeats``
times) — and compares them (:func:`advisors_app.evaluation.compare.compare_runs`, baseline
first).

The verdict rests on an **interval, not a point estimate**: per score key, the paired
bootstrap 95 % interval of the mean per-item difference (candidate − baseline, each item's
repeats averaged first). The candidate is **non-inferior** on a key when the interval's lower
bound is not below ``-margin`` (:data:`~advisors_app.models.evaluation.DEFAULT_GATE_MARGIN`,
0.05); it **fails** when some key is not — a real regression, or too few or too noisy results
to rule one out (more items or repeats narrow the interval). A key no item has a number for in
both runs is not judged; when no key is, nothing is decided and the gate fails. Two point
checks can be added: ``max_regressions`` (at most that many items went down) and
``min_delta`` (no key's mean delta below it). ``manage.py eval_gate`` exits 1 on a failure, so
CI can block a promotion.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db.models import Q

from advisors_app.definition.runtime import ChainNotFound, VersionNotFound, resolve_target
from advisors_app.evaluation.compare import TOLERANCE, Comparison, compare_runs
from advisors_app.evaluation.run_options import PINNED_OPTIONS, run_option_problems
from advisors_app.evaluation.runs import EvalRunError, create_run, default_evaluators, execute_run
from advisors_app.models import (
    AdvisorChain,
    ChainVersion,
    Dataset,
    DatasetItem,
    EvalRun,
    PromotionGate,
    items_as_of,
)
from advisors_app.models.evaluation import DEFAULT_GATE_MARGIN

__all__ = [
    "DEFAULT_GATE_MARGIN",
    "GateResult",
    "KeyVerdict",
    "find_reusable_run",
    "gate_refusal",
    "judge",
    "key_verdicts",
    "promotion_evidence",
    "run_gate",
]


@dataclass(frozen=True)
class KeyVerdict:
    """One score key's interval and whether it clears ``-margin``: ``delta`` is the mean
    per-item difference over ``paired`` items, ``[low, high]`` its 95 % interval."""

    key: str
    delta: float
    low: float
    high: float
    paired: int
    margin: float

    @property
    def passed(self) -> bool:
        return self.low >= -self.margin - TOLERANCE

    def describe(self) -> str:
        """``contains: mean difference +0.0000, 95% interval [+0.0000, +0.0000] (5 items),
        not below -0.0500``."""
        side = "not below" if self.passed else "below"
        return (
            f"{self.key}: mean difference {self.delta:+.4f}, 95% interval "
            f"[{self.low:+.4f}, {self.high:+.4f}] ({self.paired} items), "
            f"{side} {-self.margin:+.4f}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "ci_low": self.low,
            "ci_high": self.high,
            "paired": self.paired,
            "passed": self.passed,
        }


def key_verdicts(comparison: Comparison, margin: float = DEFAULT_GATE_MARGIN) -> list[KeyVerdict]:
    """Each score key with an interval (some item has a number in both runs), judged against
    ``-margin``."""
    return [
        KeyVerdict(score.key, score.delta, score.ci_low, score.ci_high, score.paired, margin)
        for score in comparison.scores.values()
        if score.delta is not None and score.ci_low is not None and score.ci_high is not None
    ]


@dataclass
class GateResult:
    """The gate's verdict: ``passed``, why not (``reasons``), each score key's interval
    (``verdicts``, against ``-margin``), the two runs and their comparison; ``reused`` names the
    runs taken from before (``"baseline"``, ``"candidate"``)."""

    passed: bool
    reasons: list[str]
    baseline: EvalRun
    candidate: EvalRun
    comparison: Comparison
    reused: list[str] = field(default_factory=list)
    margin: float = DEFAULT_GATE_MARGIN
    verdicts: list[KeyVerdict] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "reasons": self.reasons,
            "margin": self.margin,
            "intervals": {verdict.key: verdict.to_dict() for verdict in self.verdicts},
            "baseline": _run_dict(self.baseline),
            "candidate": _run_dict(self.candidate),
            "reused": self.reused,
            "comparison": self.comparison.to_dict(),
        }


def _run_dict(run: EvalRun) -> dict[str, Any]:
    return {
        "run": run.pk,
        "version": run.version_number,
        "repeats": run.repeats,
        "chat_options": run.chat_options,
    }


def judge(
    comparison: Comparison,
    *,
    margin: float = DEFAULT_GATE_MARGIN,
    max_regressions: int | None = None,
    min_delta: float | None = None,
) -> list[str]:
    """Why the candidate fails (empty: it passes); see the module docstring."""
    verdicts = key_verdicts(comparison, margin)
    reasons = [
        f"{verdict.describe()}: it may be worse by more than the margin"
        for verdict in verdicts
        if not verdict.passed
    ]
    if not verdicts:
        reasons.append(
            "no score key has a number for the same item in both runs: nothing to decide on"
        )
    regressed = comparison.regressed
    if max_regressions is not None and len(regressed) > max_regressions:
        keys = ", ".join(item.key for item in regressed[:10])
        more = "…" if len(regressed) > 10 else ""
        reasons.append(
            f"{len(regressed)} item(s) regressed ({keys}{more}); at most {max_regressions} may"
        )
    if min_delta is not None:
        for key, score in comparison.scores.items():
            if score.delta is not None and score.delta < min_delta:
                reasons.append(
                    f"{key}: mean delta {score.delta:+.4f} is below {min_delta:+.4f} "
                    f"(95% interval [{score.ci_low:+.4f}, {score.ci_high:+.4f}])"
                )
    return reasons


def _unchanged_since(dataset: Dataset, at: Any) -> bool:
    return (
        not DatasetItem.objects.filter(dataset=dataset)
        .filter(Q(valid_from__gt=at) | Q(valid_to__gt=at))
        .exists()
    )


def find_reusable_run(
    dataset: Dataset,
    chain: str,
    version_id: int,
    evaluators: Sequence[Mapping[str, Any]],
    *,
    repeats: int | None = None,
    chat_options: Mapping[str, Any] | None = None,
) -> EvalRun | None:
    """The newest done run of version ``version_id`` of ``chain`` on ``dataset`` with these
    ``evaluators`` (and, when given, these ``repeats`` and pinned ``chat_options``), if the
    dataset did not change since its ``as_of``."""
    candidates = EvalRun.objects.filter(
        dataset=dataset,
        chain_slug=chain,
        chain_version_id=version_id,
        status=EvalRun.Status.DONE,
        evaluators=list(evaluators),
    ).order_by("-as_of", "-pk")
    if repeats is not None:
        candidates = candidates.filter(repeats=repeats)
    if chat_options is not None:
        candidates = candidates.filter(chat_options=dict(chat_options))
    run = candidates.first()
    return run if run is not None and _unchanged_since(dataset, run.as_of) else None


def run_gate(
    dataset: Dataset | str,
    chain: str,
    *,
    candidate: str,
    baseline: str,
    margin: float = DEFAULT_GATE_MARGIN,
    max_regressions: int | None = None,
    min_delta: float | None = None,
    evaluators: Sequence[Mapping[str, Any]] | None = None,
    repeats: int = 1,
    chat_options: Mapping[str, Any] | None = None,
    reuse: bool = True,
    created_by: Any = None,
) -> GateResult:
    """Compare ``candidate``'s version with ``baseline``'s on ``dataset`` (see the module
    docstring); runs it makes repeat each item ``repeats`` times with ``chat_options`` pinned
    (default: temperature 0 and a seed). Blocking;
    :class:`~advisors_app.evaluation.runs.EvalRunError` when it cannot run."""
    if not 0 <= margin <= 1:
        raise EvalRunError(f"margin {margin!r}: give a number from 0 to 1.")
    pinned = dict(PINNED_OPTIONS if chat_options is None else chat_options)
    problems = run_option_problems(pinned, repeats)
    if problems:
        raise EvalRunError(" ".join(problems))
    if isinstance(dataset, str):
        try:
            dataset = Dataset.objects.get(slug=dataset)
        except Dataset.DoesNotExist:
            raise EvalRunError(f"No dataset {dataset!r}.") from None
    config = (
        [dict(e) for e in evaluators]
        if evaluators is not None
        else default_evaluators(items_as_of(dataset))
    )
    if not items_as_of(dataset).exists():
        raise EvalRunError(f"Dataset {dataset.slug!r} has no items: it cannot judge anything.")
    # Both labels are resolved before anything runs: an unknown one fails at once, not after
    # a whole run of the other.
    targets = {}
    for role, label in (("baseline", baseline), ("candidate", candidate)):
        try:
            targets[role] = resolve_target(chain, label=label)
        except ChainNotFound:
            raise EvalRunError(f"No enabled chain {chain!r}.") from None
        except VersionNotFound as exc:
            raise EvalRunError(f"{role}: {exc}") from None
    runs: dict[str, EvalRun] = {}
    reused: list[str] = []
    for role, target in targets.items():
        found = None
        if reuse and target.version_id is not None:
            found = find_reusable_run(
                dataset, chain, target.version_id, config, repeats=repeats, chat_options=pinned
            )
        if found is not None:
            runs[role] = found
            reused.append(role)
            continue
        run = create_run(
            dataset,
            chain,
            version=target.number,
            evaluators=config,
            created_by=created_by,
            repeats=repeats,
            chat_options=pinned,
        )
        # Run by number (a label moved meanwhile changes nothing); shown with the label.
        EvalRun.objects.filter(pk=run.pk).update(label=label)
        execute_run(run.pk)
        runs[role] = EvalRun.objects.get(pk=run.pk)
    comparison = compare_runs(runs["baseline"], runs["candidate"])
    reasons = judge(comparison, margin=margin, max_regressions=max_regressions, min_delta=min_delta)
    return GateResult(
        passed=not reasons,
        reasons=reasons,
        baseline=runs["baseline"],
        candidate=runs["candidate"],
        comparison=comparison,
        reused=reused,
        margin=margin,
        verdicts=key_verdicts(comparison, margin),
    )


def promotion_evidence(version_id: int, current_version_id: int | None) -> dict[str, Any] | None:
    """What the admin's Promote page shows of a move from ``current_version_id`` (what the
    label serves; ``None``: a new label) to ``version_id``: the newest done run of the new
    version, and — when the served version has a done run on the same dataset — its comparison
    with the newest such run (``counts``, ``scores``, ``baseline``, ``verdicts``: each score
    key's interval, ``passed``: the gate's default verdict, every lower bound not below
    ``-DEFAULT_GATE_MARGIN``). ``None`` when the new version has no done run."""
    done = EvalRun.objects.filter(status=EvalRun.Status.DONE).select_related("dataset")
    candidate = done.filter(chain_version_id=version_id).order_by("-finished_at", "-pk").first()
    if candidate is None:
        return None
    evidence: dict[str, Any] = {"candidate": candidate, "baseline": None}
    if current_version_id is None or current_version_id == version_id:
        return evidence
    baseline = (
        done.filter(chain_version_id=current_version_id, dataset_id=candidate.dataset_id)
        .order_by("-finished_at", "-pk")
        .first()
    )
    if baseline is None:
        return evidence
    comparison = compare_runs(baseline, candidate)
    evidence.update(
        baseline=baseline,
        counts=comparison.counts(),
        scores=list(comparison.scores.values()),
        verdicts=key_verdicts(comparison),
        passed=not judge(comparison),
    )
    return evidence


def _gate_config(gate: PromotionGate) -> list[dict[str, Any]]:
    if gate.evaluators:
        return [dict(entry) for entry in gate.evaluators]
    return default_evaluators(items_as_of(gate.dataset))


def gate_refusal(chain: AdvisorChain, label: str, version: ChainVersion) -> list[str]:
    """Why moving ``label`` of ``chain`` to ``version`` is refused by the chain's
    :class:`~advisors_app.models.PromotionGate` (empty: allowed — no gate on that label, a gate
    turned off, a new label, or the version it serves already).

    Both the version and the one the label serves need a finished run on the gate's dataset
    with its evaluators, made since the dataset last changed (``manage.py eval_gate`` makes
    them; reused here, never run); the comparison must pass the gate's thresholds."""
    gate = PromotionGate.objects.filter(chain=chain, label=label, enabled=True).first()
    if gate is None:
        return []
    served = chain.labels.filter(name=label).values_list("version_id", flat=True).first()
    if served is None or served == version.pk:
        return []
    config = _gate_config(gate)
    runs = {}
    for role, version_id in (("candidate", version.pk), ("baseline", served)):
        run = find_reusable_run(gate.dataset, chain.slug, version_id, config)
        if run is None:
            number = ChainVersion.objects.filter(pk=version_id).values_list("number", flat=True)
            return [
                f"{label} is gated by dataset {gate.dataset.slug!r}: version "
                f"{number.first()} ({role}) has no finished run on it since it last changed; "
                f"run manage.py eval_gate {gate.dataset.slug} --chain {chain.slug} "
                f"--candidate <label of version {version.number}> --baseline {label}"
            ]
        runs[role] = run
    comparison = compare_runs(runs["baseline"], runs["candidate"])
    reasons = judge(
        comparison,
        margin=gate.margin,
        max_regressions=gate.max_regressions,
        min_delta=gate.min_delta,
    )
    return [f"{label} is gated by dataset {gate.dataset.slug!r}: {r}" for r in reasons]
