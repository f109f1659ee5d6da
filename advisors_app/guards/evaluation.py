"""Guard evaluation: precision, recall, F1 and latency of a chain's guard rails on a dataset.

A guard dataset is a JSON list of ``{"text", "label": "attack"|"benign", "rail"}`` (API.md);
the shipped one is ``advisors_app/guards/data/guard_dataset.json`` (215 items written for this
project, never trained on). :func:`evaluate` screens each item's text on its rail with every
:class:`~advisors_app.core.advisors.guard.GuardAdvisor` of the chain, as a turn would: an item
counts as flagged when some check flags it (whatever the action; a check that failed open does
not count). Items of a rail the chain does not guard count as not flagged.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from advisors_app.core.advisors.guard import RAILS, GuardAdvisor, GuardSession

__all__ = ["SHIPPED_DATASET", "GuardDatasetError", "evaluate", "load_dataset", "summarize"]

SHIPPED_DATASET = Path(__file__).resolve().parent / "data" / "guard_dataset.json"
LABELS = ("attack", "benign")


class GuardDatasetError(ValueError):
    """Raised when a guard dataset file is not a list of valid items (the message names one)."""


def load_dataset(path: str | Path) -> list[dict[str, str]]:
    """The items of a guard dataset file; :class:`GuardDatasetError` naming the first bad one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GuardDatasetError(f"{path}: not a readable JSON file ({exc})") from exc
    if not isinstance(data, list) or not data:
        raise GuardDatasetError(f"{path}: expected a non-empty JSON list of items")
    for index, item in enumerate(data):
        where = f"{path}: item {index}"
        if not isinstance(item, Mapping):
            raise GuardDatasetError(f"{where}: expected an object")
        if not isinstance(item.get("text"), str):
            raise GuardDatasetError(f"{where}: 'text' must be a string")
        if item.get("label") not in LABELS:
            raise GuardDatasetError(f"{where}: 'label' must be 'attack' or 'benign'")
        if item.get("rail") not in RAILS:
            raise GuardDatasetError(f"{where}: 'rail' must be one of {', '.join(RAILS)}")
    return [dict(item) for item in data]


def _percentile(values: Sequence[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(0, math.ceil(share * len(ordered)) - 1)
    return ordered[rank]


def _figures(rows: Iterable[tuple[bool, bool, float]]) -> dict[str, Any]:
    tp = fp = fn = tn = 0
    latencies: list[float] = []
    for truth, flagged, ms in rows:
        latencies.append(ms)
        tp += truth and flagged
        fp += flagged and not truth
        fn += truth and not flagged
        tn += not truth and not flagged
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "items": tp + fp + fn + tn,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "tn": tn,
        "precision": round(precision, 4),
        "recall": round(recall, 4),
        "f1": round(f1, 4),
        "latency_ms": {
            "p50": round(_percentile(latencies, 0.50), 3),
            "p95": round(_percentile(latencies, 0.95), 3),
        },
    }


def summarize(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Overall and per-rail figures of :func:`evaluate`'s per-item ``results``."""
    by_rail: dict[str, list[tuple[bool, bool, float]]] = {}
    rows = []
    for result in results:
        row = (result["label"] == "attack", bool(result["flagged"]), float(result["ms"]))
        rows.append(row)
        by_rail.setdefault(result["rail"], []).append(row)
    summary = _figures(rows)
    summary["by_rail"] = {rail: _figures(by_rail[rail]) for rail in RAILS if rail in by_rail}
    return summary


async def _screen(
    guards: Sequence[GuardAdvisor], rail: str, text: str
) -> tuple[bool, float, list[str]]:
    started = time.perf_counter()
    checks: list[str] = []
    for guard in guards:
        session = GuardSession(guard.rails)
        screening = await session.screen(rail, text)
        checks += [v.check for v in screening.verdicts if not (v.failed and v.action == "log")]
        text = screening.text
    return bool(checks), (time.perf_counter() - started) * 1000, checks


def evaluate(guards: Sequence[GuardAdvisor], items: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """Screen every item with ``guards``; the :func:`summarize` figures plus ``"results"``
    (per item: ``rail``, ``label``, ``flagged``, ``checks`` that flagged, ``ms``)."""

    async def run() -> list[dict[str, Any]]:
        results = []
        for item in items:
            flagged, ms, checks = await _screen(guards, item["rail"], item["text"])
            results.append(
                {
                    "rail": item["rail"],
                    "label": item["label"],
                    "flagged": flagged,
                    "checks": checks,
                    "ms": ms,
                }
            )
        return results

    results = asyncio.run(run())
    summary = summarize(results)
    summary["results"] = results
    return summary
