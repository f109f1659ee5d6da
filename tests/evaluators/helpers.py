"""Shared by the evaluator tests: a case builder and a one-line evaluate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from advisors_app.evaluation.evaluators import EvalCase, EvalScore, evaluator_registry


def case(
    answer: str = "",
    expected: Mapping[str, Any] | None = None,
    *,
    message: str = "What is the capital of France?",
    documents: Sequence[Mapping[str, Any]] = (),
    tool_calls: Sequence[Mapping[str, Any]] = (),
    latency_ms: float | None = None,
    cost: Decimal | None = None,
) -> EvalCase:
    """A case whose chain answered ``answer``; ``expected`` as a dataset item holds it."""
    return EvalCase(
        input={"message": message},
        expected=dict(expected or {}),
        output=answer,
        documents=documents,
        tool_calls=tool_calls,
        latency_ms=latency_ms,
        cost=cost,
    )


async def judge(evaluator: str, eval_case: EvalCase, /, **params: Any) -> EvalScore:
    """The score of the ``evaluator`` built from ``params`` on ``eval_case``."""
    return await evaluator_registry.build(evaluator, params).evaluate(eval_case)
