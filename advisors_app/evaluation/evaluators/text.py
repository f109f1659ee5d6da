"""Text evaluators: ``exact``, ``contains``, ``regex`` and ``token_f1`` on the answer's text.

``exact``, ``contains`` and ``regex`` are pass/fail checks (``value`` and ``passed`` are the
same ``bool``); ``token_f1`` is graded: the word overlap with the reference answer (SQuAD's
F1: precision and recall of the answer's words, case aside), passed from ``threshold`` on — what
a reference written as a whole answer (a reviewer's correction, a rated reply) can be judged
by, since a model's new answer seldom contains it word for word. ``exact``, ``contains`` and
``token_f1`` compare with ``expected.output`` unless their params give the text; a case
without one is not judged (:data:`~advisors_app.evaluation.evaluators.base.NOT_APPLICABLE`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from .base import BaseEvaluator, EvalCase, EvalScore
from .registry import EvaluatorSpec, EvaluatorType, object_schema

__all__ = ["TYPES", "ContainsEvaluator", "ExactEvaluator", "RegexEvaluator", "TokenF1Evaluator"]

_WHITESPACE = re.compile(r"\s+")
_WORD = re.compile(r"\w+")

_IGNORE_CASE = {
    "type": "boolean",
    "default": False,
    "description": "Compare without regard to case (Unicode casefolding).",
}


def _excerpt(text: str, limit: int = 200) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _expected_output(case: EvalCase) -> str | None:
    value = case.expected.get("output")
    return value if isinstance(value, str) else None


class ExactEvaluator(BaseEvaluator):
    """Passes when the answer equals the expected text after the chosen normalisation.

    ``whitespace``: ``"exact"`` compares as is, ``"strip"`` ignores leading and trailing
    whitespace, ``"collapse"`` also treats every run of whitespace as one space.
    """

    __slots__ = ("expected", "ignore_case", "whitespace")

    def __init__(
        self,
        key: str,
        expected: str | None = None,
        *,
        ignore_case: bool = False,
        whitespace: str = "strip",
    ) -> None:
        super().__init__(key)
        self.expected = expected
        self.ignore_case = ignore_case
        self.whitespace = whitespace

    def normalize(self, text: str) -> str:
        if self.whitespace == "collapse":
            text = _WHITESPACE.sub(" ", text).strip()
        elif self.whitespace == "strip":
            text = text.strip()
        return text.casefold() if self.ignore_case else text

    async def evaluate(self, case: EvalCase) -> EvalScore:
        expected = self.expected if self.expected is not None else _expected_output(case)
        if expected is None:
            return self.not_applicable("no expected.output to compare with")
        if self.normalize(case.output) == self.normalize(expected):
            return self.check(True, "the answer equals the expected output")
        return self.check(
            False, f"expected {_excerpt(expected)}, the answer was {_excerpt(case.output)}"
        )


class ContainsEvaluator(BaseEvaluator):
    """Passes when the answer contains all (``mode="all"``) or any (``"any"``) of the strings."""

    __slots__ = ("ignore_case", "mode", "strings")

    def __init__(
        self,
        key: str,
        strings: Sequence[str] | None = None,
        *,
        mode: str = "all",
        ignore_case: bool = False,
    ) -> None:
        super().__init__(key)
        self.strings = tuple(strings) if strings is not None else None
        self.mode = mode
        self.ignore_case = ignore_case

    async def evaluate(self, case: EvalCase) -> EvalScore:
        strings = self.strings
        if strings is None:
            expected = _expected_output(case)
            if not expected:
                return self.not_applicable("no strings given and no expected.output")
            strings = (expected,)
        fold = str.casefold if self.ignore_case else str
        output = fold(case.output)
        found = [s for s in strings if fold(s) in output]
        missing = [s for s in strings if s not in found]
        passed = bool(found) if self.mode == "any" else not missing
        if passed:
            return self.check(True, "found " + ", ".join(_excerpt(s, 80) for s in found))
        what = "none of" if self.mode == "any" else "missing"
        return self.check(False, f"{what} " + ", ".join(_excerpt(s, 80) for s in missing))


class RegexEvaluator(BaseEvaluator):
    """Passes when ``pattern`` matches the answer (searched anywhere, or the whole answer with
    ``full_match``); ``negate`` passes when it does not match."""

    __slots__ = ("full_match", "negate", "pattern")

    def __init__(
        self, key: str, pattern: re.Pattern[str], *, full_match: bool = False, negate: bool = False
    ) -> None:
        super().__init__(key)
        self.pattern = pattern
        self.full_match = full_match
        self.negate = negate

    async def evaluate(self, case: EvalCase) -> EvalScore:
        match = (self.pattern.fullmatch if self.full_match else self.pattern.search)(case.output)
        matched = match is not None
        if match is not None:
            comment = f"matched {_excerpt(match.group(0), 80)} at {match.start()}"
        else:
            comment = f"/{self.pattern.pattern}/ does not match the answer"
        return self.check(matched != self.negate, comment)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.casefold())


class TokenF1Evaluator(BaseEvaluator):
    """The answer's word overlap with the reference (F1 of precision and recall over word
    counts, case aside), in [0, 1]; passed from ``threshold`` on."""

    __slots__ = ("expected", "threshold")

    def __init__(self, key: str, expected: str | None = None, *, threshold: float = 0.5) -> None:
        super().__init__(key)
        self.expected = expected
        self.threshold = threshold

    async def evaluate(self, case: EvalCase) -> EvalScore:
        expected = self.expected if self.expected is not None else _expected_output(case)
        if not expected or not _words(expected):
            return self.not_applicable("no expected.output to compare with")
        reference, answer = Counter(_words(expected)), Counter(_words(case.output))
        common = sum((reference & answer).values())
        if not common:
            f1 = 0.0
        else:
            precision = common / sum(answer.values())
            recall = common / sum(reference.values())
            f1 = 2 * precision * recall / (precision + recall)
        f1 = round(f1, 4)
        return self.score(f1, f1 >= self.threshold, f"word overlap F1 {f1:.2f}")


def _token_f1(spec: EvaluatorSpec) -> TokenF1Evaluator:
    p = spec.params
    return TokenF1Evaluator(spec.key, p.get("expected"), threshold=p["threshold"])


def _exact(spec: EvaluatorSpec) -> ExactEvaluator:
    p = spec.params
    return ExactEvaluator(
        spec.key, p.get("expected"), ignore_case=p["ignore_case"], whitespace=p["whitespace"]
    )


def _contains(spec: EvaluatorSpec) -> ContainsEvaluator:
    p = spec.params
    return ContainsEvaluator(
        spec.key, p.get("strings"), mode=p["mode"], ignore_case=p["ignore_case"]
    )


def _regex(spec: EvaluatorSpec) -> RegexEvaluator:
    p = spec.params
    flags = (
        (re.IGNORECASE if p["ignore_case"] else 0)
        | (re.MULTILINE if p["multiline"] else 0)
        | (re.DOTALL if p["dotall"] else 0)
    )
    try:
        pattern = re.compile(p["pattern"], flags)
    except re.error as exc:
        raise spec.error("pattern", f"Not a valid regular expression: {exc}.") from exc
    return RegexEvaluator(spec.key, pattern, full_match=p["full_match"], negate=p["negate"])


TYPES: tuple[EvaluatorType, ...] = (
    EvaluatorType(
        key="exact",
        label="Exact match",
        factory=_exact,
        description="Passes when the answer equals the expected output (or `expected`), "
        "optionally ignoring case and whitespace.",
        params_schema=object_schema(
            {
                "expected": {
                    "type": "string",
                    "description": "Text to compare with (default: the item's expected.output).",
                },
                "ignore_case": _IGNORE_CASE,
                "whitespace": {
                    "enum": ["exact", "strip", "collapse"],
                    "default": "strip",
                    "description": "exact: as is; strip: ignore leading and trailing "
                    "whitespace; collapse: also treat each run of whitespace as one space.",
                },
            }
        ),
    ),
    EvaluatorType(
        key="contains",
        label="Contains",
        factory=_contains,
        description="Passes when the answer contains all (or any) of the strings; default: "
        "the expected output.",
        params_schema=object_schema(
            {
                "strings": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "description": "Strings to look for (default: the item's expected.output).",
                },
                "mode": {
                    "enum": ["all", "any"],
                    "default": "all",
                    "description": "all: every string must occur; any: one is enough.",
                },
                "ignore_case": _IGNORE_CASE,
            }
        ),
    ),
    EvaluatorType(
        key="regex",
        label="Regular expression",
        factory=_regex,
        description="Passes when a regular expression (Python syntax) matches the answer.",
        params_schema=object_schema(
            {
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 2000,
                    "description": "Python regular expression.",
                },
                "full_match": {
                    "type": "boolean",
                    "default": False,
                    "description": "Match the whole answer rather than search in it.",
                },
                "negate": {
                    "type": "boolean",
                    "default": False,
                    "description": "Pass when the pattern does NOT match.",
                },
                "ignore_case": {"type": "boolean", "default": False},
                "multiline": {
                    "type": "boolean",
                    "default": False,
                    "description": "^ and $ match at every line.",
                },
                "dotall": {
                    "type": "boolean",
                    "default": False,
                    "description": ". matches newlines too.",
                },
            },
            required=("pattern",),
        ),
    ),
    EvaluatorType(
        key="token_f1",
        label="Word overlap (F1)",
        factory=_token_f1,
        description="The answer's word overlap with the expected output (F1, case aside), "
        "0 to 1; passes from the threshold on. For references written as whole answers.",
        params_schema=object_schema(
            {
                "expected": {
                    "type": "string",
                    "description": "Text to compare with (default: the item's expected.output).",
                },
                "threshold": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "default": 0.5,
                    "description": "The F1 from which the item passes.",
                },
            }
        ),
    ),
)
