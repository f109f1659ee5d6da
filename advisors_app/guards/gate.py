"""The guard gate: does a candidate version's guard do no worse than the baseline's on a guard
dataset? (issue 38, "the promotion gate able to require that a guard dataset does not regress").

:func:`guard_gate` screens the guard dataset with the ``guard`` advisors of the versions two
labels (or version numbers) point at (:func:`advisors_app.guards.evaluation.evaluate`) and
compares precision and recall, overall and per rail: the candidate fails when one of them is
below the baseline's by more than ``margin`` (default 0: screening is deterministic, so any
drop is real, not noise). A candidate without a guard against a baseline with one fails on
recall; a baseline without a guard is passed by anything. ``manage.py eval_gate ...
--guard-dataset FILE [--guard-margin X]`` adds it to the evaluation gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from advisors_app.core.advisors.guard import GuardAdvisor
from advisors_app.definition.runtime import load_chain
from advisors_app.guards.evaluation import evaluate

__all__ = ["DEFAULT_GUARD_MARGIN", "GuardGateResult", "guard_gate"]

#: How far precision or recall may fall below the baseline's.
DEFAULT_GUARD_MARGIN = 0.0
_JUDGED = ("precision", "recall")


@dataclass(frozen=True)
class GuardGateResult:
    """Both versions' :func:`~advisors_app.guards.evaluation.evaluate` figures (without
    per-item results) and why the candidate fails (``reasons``; empty: it passed)."""

    candidate: Mapping[str, Any]
    baseline: Mapping[str, Any]
    margin: float
    reasons: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.reasons

    def lines(self, candidate: str, baseline: str) -> list[str]:
        """The verdict as a person reads it: overall and per rail, candidate against baseline."""
        lines = [f"guard dataset: {candidate} against {baseline} (margin {self.margin:.4f})"]
        scopes = [("overall", self.candidate, self.baseline)]
        scopes += [
            (rail, figures, self.baseline.get("by_rail", {}).get(rail, {}))
            for rail, figures in self.candidate.get("by_rail", {}).items()
        ]
        for name, new, old in scopes:
            parts = [
                f"{key} {new.get(key, 0.0):.3f} (was {old.get(key, 0.0):.3f})" for key in _JUDGED
            ]
            lines.append(f"  {name:>14}: " + "  ".join(parts))
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "margin": self.margin,
            "reasons": list(self.reasons),
            "candidate": dict(self.candidate),
            "baseline": dict(self.baseline),
        }


def _figures(chain: str, ref: str | int, items: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    label, version = (None, ref) if isinstance(ref, int) else (ref, None)
    compiled = load_chain(chain, label=label, version=version)
    guards = [a for a in compiled.advisors if isinstance(a, GuardAdvisor)]
    report = evaluate(guards, items)
    report.pop("results")
    return report


def guard_gate(
    items: Sequence[Mapping[str, str]],
    chain: str,
    *,
    candidate: str | int,
    baseline: str | int,
    margin: float = DEFAULT_GUARD_MARGIN,
) -> GuardGateResult:
    """Judge ``candidate`` against ``baseline`` (labels, or version numbers) of ``chain`` on
    the guard dataset ``items`` (see the module docstring). Raises what ``load_chain`` raises
    for an unknown chain, label or version."""
    new = _figures(chain, candidate, items)
    old = _figures(chain, baseline, items)
    reasons = []
    scopes = [("overall", new, old)]
    scopes += [(rail, f, old["by_rail"].get(rail, {})) for rail, f in new["by_rail"].items()]
    for name, figures, before in scopes:
        for key in _JUDGED:
            was = float(before.get(key, 0.0))
            now = float(figures.get(key, 0.0))
            if now < was - margin - 1e-9:
                reasons.append(f"guard {key} on {name} fell from {was:.3f} to {now:.3f}")
    return GuardGateResult(new, old, margin, reasons)
