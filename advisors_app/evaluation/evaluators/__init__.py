"""Evaluators: judge what a chain produced for a dataset item (issue 22).

``evaluator_registry.build(key, params)`` returns an :class:`Evaluator`; ``await
evaluator.evaluate(case)`` turns an :class:`EvalCase` into an :class:`EvalScore`. The
registry works as the advisor-type registry does (key, JSON-Schema params, factory,
description; third parties register theirs): see :mod:`.registry`.

Built-ins, one module per family: :mod:`.text` (``exact``, ``contains``, ``regex``),
:mod:`.json_schema` (``json_schema``), :mod:`.retrieval` (``retrieval_hit_at_k``, ``mrr``),
:mod:`.tools` (``tool_call_match``), :mod:`.thresholds` (``latency_under``, ``cost_under``)
and :mod:`.llm_judge` (``llm_judge``). They are registered when this package is imported; a
key already registered (a third party's replacement) is left alone.
"""

from __future__ import annotations

from . import json_schema, llm_judge, retrieval, text, thresholds, tools
from .base import (
    INVALID,
    MAX_COMMENT_CHARS,
    NOT_APPLICABLE,
    UNKNOWN,
    BaseEvaluator,
    EvalCase,
    EvalScore,
    Evaluator,
)
from .registry import (
    EvaluatorParamsError,
    EvaluatorRegistry,
    EvaluatorServices,
    EvaluatorSpec,
    EvaluatorType,
    evaluator_registry,
    object_schema,
)
from .services import DjangoEvaluatorServices

__all__ = [
    "BUILTIN_EVALUATORS",
    "INVALID",
    "MAX_COMMENT_CHARS",
    "NOT_APPLICABLE",
    "UNKNOWN",
    "BaseEvaluator",
    "DjangoEvaluatorServices",
    "EvalCase",
    "EvalScore",
    "Evaluator",
    "EvaluatorParamsError",
    "EvaluatorRegistry",
    "EvaluatorServices",
    "EvaluatorSpec",
    "EvaluatorType",
    "evaluator_registry",
    "object_schema",
    "register_builtins",
]

#: Every built-in evaluator type, in the order the admin lists them.
BUILTIN_EVALUATORS: tuple[EvaluatorType, ...] = (
    *text.TYPES,
    *json_schema.TYPES,
    *retrieval.TYPES,
    *tools.TYPES,
    *thresholds.TYPES,
    *llm_judge.TYPES,
)


def register_builtins(registry: EvaluatorRegistry = evaluator_registry) -> None:
    """Register every built-in type (idempotent: a key already registered is left alone)."""
    for evaluator_type in BUILTIN_EVALUATORS:
        if evaluator_type.key not in registry:
            registry.register_type(evaluator_type)


register_builtins()
