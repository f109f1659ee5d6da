"""Threshold evaluators: ``latency_under`` (milliseconds) and ``cost_under`` (money).

Both pass when the measured value is strictly below the threshold. A turn whose latency or
cost is unknown (a model with no price in the price list: see docs/costs.md) is not judged:
``value`` :data:`~advisors_app.evaluation.evaluators.base.UNKNOWN`, ``passed`` ``None`` — an
unknown cost is not zero.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

from .base import UNKNOWN, BaseEvaluator, EvalCase, EvalScore
from .registry import EvaluatorSpec, EvaluatorType, object_schema

__all__ = ["TYPES", "CostUnderEvaluator", "LatencyUnderEvaluator"]


class LatencyUnderEvaluator(BaseEvaluator):
    """Passes when the turn took less than ``threshold_ms`` milliseconds."""

    __slots__ = ("threshold_ms",)

    def __init__(self, key: str, threshold_ms: float) -> None:
        super().__init__(key)
        self.threshold_ms = threshold_ms

    async def evaluate(self, case: EvalCase) -> EvalScore:
        if case.latency_ms is None:
            return self.score(UNKNOWN, None, "latency unknown; not judged")
        latency = case.latency_ms
        relation = "<" if latency < self.threshold_ms else "≥"
        return self.check(
            latency < self.threshold_ms, f"{latency:g} ms {relation} {self.threshold_ms:g} ms"
        )


class CostUnderEvaluator(BaseEvaluator):
    """Passes when the turn cost less than ``threshold`` (a ``Decimal`` in ``currency``).

    The case's cost carries no currency: the run must give it in the threshold's currency
    (the deployment's prices, usually USD); ``currency`` only labels the comment.
    """

    __slots__ = ("currency", "threshold")

    def __init__(self, key: str, threshold: Decimal, currency: str = "USD") -> None:
        super().__init__(key)
        self.threshold = threshold
        self.currency = currency

    async def evaluate(self, case: EvalCase) -> EvalScore:
        if case.cost is None:
            return self.score(
                UNKNOWN,
                None,
                f"cost unknown (no price for the model); not judged against "
                f"{self.threshold} {self.currency}",
            )
        cost = Decimal(str(case.cost))
        relation = "<" if cost < self.threshold else "≥"
        return self.check(
            cost < self.threshold,
            f"{cost.normalize():f} {self.currency} {relation} {self.threshold} {self.currency}",
        )


def _latency_under(spec: EvaluatorSpec) -> LatencyUnderEvaluator:
    return LatencyUnderEvaluator(spec.key, float(spec.params["threshold_ms"]))


def _cost_under(spec: EvaluatorSpec) -> CostUnderEvaluator:
    raw: Any = spec.params["threshold"]
    try:
        threshold = Decimal(str(raw))
    except InvalidOperation as exc:
        raise spec.error("threshold", 'Enter a decimal amount, e.g. "0.01".') from exc
    if not threshold.is_finite() or threshold < 0:
        raise spec.error("threshold", "Enter a finite amount of at least 0.")
    return CostUnderEvaluator(spec.key, threshold, spec.params["currency"])


TYPES: tuple[EvaluatorType, ...] = (
    EvaluatorType(
        key="latency_under",
        label="Latency under",
        factory=_latency_under,
        description="Passes when the turn took less than threshold_ms milliseconds.",
        params_schema=object_schema(
            {
                "threshold_ms": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "Milliseconds the turn must stay under.",
                },
            },
            required=("threshold_ms",),
        ),
    ),
    EvaluatorType(
        key="cost_under",
        label="Cost under",
        factory=_cost_under,
        description="Passes when the turn cost less than threshold; a turn of unknown cost "
        "is not judged.",
        params_schema=object_schema(
            {
                "threshold": {
                    "type": ["string", "number"],
                    "pattern": r"^[0-9]+(\.[0-9]+)?$",
                    "minimum": 0,
                    "description": "Amount the turn must cost less than, as a decimal string "
                    '("0.002") or a number.',
                },
                "currency": {
                    "type": "string",
                    "pattern": "^[A-Z]{3}$",
                    "default": "USD",
                    "description": "Currency of the threshold and of the costs (ISO 4217 "
                    "code); no conversion is made.",
                },
            },
            required=("threshold",),
        ),
    ),
)
