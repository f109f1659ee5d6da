"""Retrieval evaluators: ``retrieval_hit_at_k`` and ``mrr``, from the retrieved documents.

No model is needed: the run puts the documents the turn retrieved (its context's
``qa_retrieved_documents`` / RAG document context) into :attr:`EvalCase.documents`, in rank
order, and the item's ``expected.documents`` says which are right: ``{metadata_key: [accepted
values]}``. A document is **accepted** when, for every key listed (``keys="all"``, the
default) or for at least one (``keys="any"``), its metadata value is one of the accepted values
(a list-valued metadata field matches when any element is accepted). Values compare as JSON
values (``1`` equals ``1.0``, never ``"1"`` nor ``true``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .base import BaseEvaluator, EvalCase, EvalScore, json_equal
from .registry import EvaluatorSpec, EvaluatorType, object_schema

__all__ = ["TYPES", "HitAtKEvaluator", "MrrEvaluator", "accepts", "first_accepted_rank"]


def _metadata(document: Any) -> Mapping[str, Any]:
    metadata = (
        document.get("metadata")
        if isinstance(document, Mapping)
        else getattr(document, "metadata", None)
    )
    return metadata if isinstance(metadata, Mapping) else {}


def _value_accepted(value: Any, accepted: Sequence[Any]) -> bool:
    values = value if isinstance(value, list) else [value]
    return any(json_equal(v, a) for v in values for a in accepted)


def accepts(document: Any, expected: Mapping[str, Sequence[Any]], keys: str = "all") -> bool:
    """Whether ``document``'s metadata matches ``expected`` (see the module docstring)."""
    metadata = _metadata(document)
    matches = (
        name in metadata and _value_accepted(metadata[name], accepted)
        for name, accepted in expected.items()
    )
    return any(matches) if keys == "any" else all(matches)


def first_accepted_rank(
    documents: Sequence[Any], expected: Mapping[str, Sequence[Any]], keys: str = "all"
) -> int | None:
    """The 1-based rank of the first accepted document, or ``None``."""
    for rank, document in enumerate(documents, start=1):
        if accepts(document, expected, keys):
            return rank
    return None


def _expected_documents(case: EvalCase) -> Mapping[str, Sequence[Any]] | str:
    """The case's ``expected.documents``, or why it cannot be used."""
    expected = case.expected.get("documents")
    if expected is None:
        return "no expected.documents"
    if (
        not isinstance(expected, Mapping)
        or not expected
        or not all(isinstance(v, (list, tuple)) for v in expected.values())
    ):
        return "expected.documents must map metadata keys to lists of accepted values"
    return expected


class _RetrievalEvaluator(BaseEvaluator):
    __slots__ = ("k", "keys")

    def __init__(self, key: str, k: int | None, *, keys: str = "all") -> None:
        super().__init__(key)
        self.k = k
        self.keys = keys

    def rank(self, case: EvalCase) -> tuple[int | None, int] | str:
        """``(first accepted rank within the top k, documents considered)`` or a problem."""
        expected = _expected_documents(case)
        if isinstance(expected, str):
            return expected
        documents = list(case.documents)[: self.k] if self.k is not None else list(case.documents)
        return first_accepted_rank(documents, expected, self.keys), len(documents)


class HitAtKEvaluator(_RetrievalEvaluator):
    """Passes when an accepted document is among the first ``k`` retrieved (hit@k)."""

    __slots__ = ()

    async def evaluate(self, case: EvalCase) -> EvalScore:
        found = self.rank(case)
        if isinstance(found, str):
            return self.not_applicable(found)
        rank, considered = found
        if rank is None:
            return self.check(
                False, f"no accepted document in the top {self.k} ({considered} considered)"
            )
        return self.check(True, f"first accepted document at rank {rank}")


class MrrEvaluator(_RetrievalEvaluator):
    """Reciprocal rank of the first accepted document (0.0 when none; within the top ``k`` if
    given); averaged over a run it is the mean reciprocal rank. ``passed`` only with a
    ``threshold`` (value ≥ threshold)."""

    __slots__ = ("threshold",)

    def __init__(
        self, key: str, k: int | None, *, keys: str = "all", threshold: float | None = None
    ) -> None:
        super().__init__(key, k, keys=keys)
        self.threshold = threshold

    async def evaluate(self, case: EvalCase) -> EvalScore:
        found = self.rank(case)
        if isinstance(found, str):
            return self.not_applicable(found)
        rank, considered = found
        value = 0.0 if rank is None else 1.0 / rank
        passed = None if self.threshold is None else value >= self.threshold
        if rank is None:
            comment = f"no accepted document ({considered} considered)"
        else:
            comment = f"first accepted document at rank {rank}"
        return self.score(value, passed, comment)


_KEYS = {
    "enum": ["all", "any"],
    "default": "all",
    "description": "all: a document must match every metadata key of expected.documents; "
    "any: one key is enough.",
}


def _hit_at_k(spec: EvaluatorSpec) -> HitAtKEvaluator:
    return HitAtKEvaluator(spec.key, spec.params["k"], keys=spec.params["keys"])


def _mrr(spec: EvaluatorSpec) -> MrrEvaluator:
    p = spec.params
    return MrrEvaluator(spec.key, p.get("k"), keys=p["keys"], threshold=p.get("threshold"))


TYPES: tuple[EvaluatorType, ...] = (
    EvaluatorType(
        key="retrieval_hit_at_k",
        label="Retrieval hit@k",
        factory=_hit_at_k,
        description="Passes when one of the first k retrieved documents has metadata the "
        "item's expected.documents accepts. No model needed.",
        params_schema=object_schema(
            {
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1000,
                    "default": 4,
                    "description": "How many of the top documents count (retrieval's default "
                    "top_k is 4).",
                },
                "keys": _KEYS,
            }
        ),
    ),
    EvaluatorType(
        key="mrr",
        label="Reciprocal rank (MRR)",
        factory=_mrr,
        description="1/rank of the first retrieved document expected.documents accepts (0 "
        "when none); its mean over a run is the MRR. No model needed.",
        params_schema=object_schema(
            {
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1000,
                    "description": "Only the first k documents count (default: all retrieved).",
                },
                "keys": _KEYS,
                "threshold": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "Pass when the reciprocal rank is at least this "
                    "(default: no pass/fail).",
                },
            }
        ),
    ),
)
