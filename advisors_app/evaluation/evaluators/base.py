"""What an evaluator judges and what it returns: :class:`EvalCase` in, :class:`EvalScore` out.

An evaluation run turns each dataset item into one :class:`EvalCase` (the item's input and
expected values plus what the chain produced) and hands it to every evaluator of the run. An
evaluator is anything with a ``key`` and an ``async def evaluate(case)`` (:class:`Evaluator`);
the built-ins derive from :class:`BaseEvaluator` for its score helpers.

A score's ``value`` is a ``bool`` (pass/fail checks), a ``float`` (numeric in [0, 1] for the
built-ins: MRR, a normalised judge score) or a ``str`` — a label, or one of the three
sentinels below when the evaluator could not judge the case. ``passed`` is ``None`` whenever
a pass/fail makes no sense (no threshold given, nothing to judge), so a pass rate counts only
the cases that were judged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol, runtime_checkable

from advisors_app.exceptions import Refusal
from advisors_app.validation import FieldErrors, printable

__all__ = [
    "INVALID",
    "MAX_COMMENT_CHARS",
    "NOT_APPLICABLE",
    "UNKNOWN",
    "BaseEvaluator",
    "EvalCase",
    "EvalScore",
    "Evaluator",
    "EvaluatorParamsError",
    "json_equal",
    "storable_comment",
]

#: ``value`` when a judge model gave no valid verdict after its retries: no number is made up.
INVALID = "invalid"
#: ``value`` when the case holds nothing to judge against (no ``expected.output`` for
#: ``exact``, no ``expected.documents`` for ``mrr``, a malformed expectation, ...).
NOT_APPLICABLE = "n/a"
#: ``value`` when the measured quantity is unknown (no latency; a cost the price list lacks).
UNKNOWN = "unknown"

#: Comments are cut to this many characters: ``Score.comment``'s limit.
MAX_COMMENT_CHARS = 2000


@dataclass(frozen=True)
class EvalCase:
    """What one run produced for one dataset item.

    ``input``: ``{"message", "history"?, "params"?}``; ``expected``: ``{"output"?, "json"?,
    "documents"?: {metadata_key: [accepted values]}, "tool_calls"?: [{"name",
    "arguments"?}]}``; ``output``: the answer's text; ``documents``: the retrieved documents
    in rank order, each ``{"id"?, "metadata": {...}, "score"?, "text"?}``; ``tool_calls``:
    ``[{"name", "arguments"}]`` with arguments as JSON text or a dict; ``latency_ms`` in
    milliseconds; ``cost`` in the deployment's currency (``None``: unknown). ``meter``: the
    model-call meter (:class:`~advisors_app.core.metering.ModelCallMeter`) an evaluator's own
    model calls go through — an ``llm_judge``'s, charged as the turn's
    (:mod:`advisors_app.costs.side_calls`); ``None``: not metered.
    """

    input: Mapping[str, Any]
    expected: Mapping[str, Any]
    output: str
    documents: Sequence[Mapping[str, Any]] = ()
    tool_calls: Sequence[Mapping[str, Any]] = ()
    latency_ms: float | None = None
    cost: Decimal | None = None
    meter: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class EvalScore:
    """One evaluator's judgement of one case.

    ``key`` is the evaluator's score key (its registry key unless its params name another);
    ``value`` a ``bool``, a ``float`` or a label (:data:`INVALID`, :data:`NOT_APPLICABLE` and
    :data:`UNKNOWN` mark a case not judged); ``passed`` is ``None`` when pass/fail makes no
    sense; ``comment`` says why, in at most :data:`MAX_COMMENT_CHARS` characters.
    """

    key: str
    value: float | bool | str
    passed: bool | None
    comment: str = ""


class EvaluatorParamsError(Refusal, ValueError):
    """Raised when an evaluator cannot be built from its key and params (400 ``invalid``).

    ``fields`` (also ``errors``) maps each field (``"evaluator"`` for an unknown key,
    ``"params.<name>"`` for a param) to its messages, as the admin forms and the API report
    them.
    """

    def __init__(self, errors: FieldErrors, key: str = "") -> None:
        details = "; ".join(f"{f}: {' '.join(m)}" for f, m in errors.items())
        prefix = f"invalid params for evaluator {key!r}" if key else "invalid evaluator"
        super().__init__(f"{prefix}: {details}", fields=errors)

    @property
    def errors(self) -> FieldErrors:
        """``fields`` under its name before :class:`~advisors_app.exceptions.Refusal`
        (docs/evaluation.md names it)."""
        return self.fields


@runtime_checkable
class Evaluator(Protocol):
    """Judges one case: ``key`` names its scores; ``evaluate`` is ``async def``."""

    key: str

    async def evaluate(self, case: EvalCase) -> EvalScore: ...


class BaseEvaluator:
    """Holds the score key and builds scores; subclasses implement ``evaluate``."""

    __slots__ = ("key",)

    def __init__(self, key: str) -> None:
        self.key = key

    def __repr__(self) -> str:
        return f"{type(self).__name__}(key={self.key!r})"

    async def evaluate(self, case: EvalCase) -> EvalScore:
        raise NotImplementedError

    def score(self, value: float | bool | str, passed: bool | None, comment: str = "") -> EvalScore:
        """An :class:`EvalScore` under this evaluator's key, its comment made storable."""
        return EvalScore(self.key, value, passed, storable_comment(comment))

    def check(self, passed: bool, comment: str = "") -> EvalScore:
        """A pass/fail score: ``value`` and ``passed`` are both ``passed``."""
        return self.score(passed, passed, comment)

    def not_applicable(self, comment: str) -> EvalScore:
        """The case holds nothing this evaluator can judge (:data:`NOT_APPLICABLE`)."""
        return self.score(NOT_APPLICABLE, None, comment)


def storable_comment(text: str) -> str:
    """``text`` without NUL characters, unpaired surrogates escaped, cut to
    :data:`MAX_COMMENT_CHARS` (the comment quotes model output, and PostgreSQL stores it)."""
    text = printable(text.replace("\x00", ""))
    if len(text) > MAX_COMMENT_CHARS:
        text = text[: MAX_COMMENT_CHARS - 1] + "…"
    return text


def json_equal(a: Any, b: Any) -> bool:
    """Equality of decoded JSON values: a boolean never equals a number (Python's ``True == 1``
    does), ``1`` equals ``1.0``, objects compare regardless of key order."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, (list, tuple, Mapping)) or isinstance(b, (list, tuple, Mapping)):
        return False
    return bool(a == b)
