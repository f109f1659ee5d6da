"""``tool_call_match``: the tools the item expects were called (with the expected arguments).

Each expected call ``{"name", "arguments"?}`` must be matched by a different call the turn
made, of the same name and — when the expected call gives arguments — with those arguments:
every expected argument present with an equal JSON value (``arguments="subset"``, the
default) or exactly the expected ones (``"exact"``). A call's arguments may be JSON text (as
the model sent them) or a dict. ``ordered`` requires the matches in the expected order (other
calls may come between); ``allow_extra=False`` fails a turn that made calls beyond the
expected ones. ``expected.tool_calls: []`` means no tool may be called.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .base import BaseEvaluator, EvalCase, EvalScore, json_equal
from .registry import EvaluatorSpec, EvaluatorType, object_schema

__all__ = ["TYPES", "ToolCallMatchEvaluator"]

_NOT_JSON = object()


def _arguments(call: Mapping[str, Any]) -> Any:
    """A call's arguments as a dict (JSON text decoded; ``{}`` when absent or blank)."""
    arguments = call.get("arguments")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except json.JSONDecodeError:
            return _NOT_JSON
    return arguments


def _describe(call: Mapping[str, Any]) -> str:
    if "arguments" not in call:
        return str(call.get("name"))
    arguments = call["arguments"]
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    return f"{call.get('name')}({text})"


class ToolCallMatchEvaluator(BaseEvaluator):
    """Passes when every expected tool call was made (see the module docstring)."""

    __slots__ = ("allow_extra", "arguments", "ordered")

    def __init__(
        self,
        key: str,
        *,
        ordered: bool = False,
        allow_extra: bool = True,
        arguments: str = "subset",
    ) -> None:
        super().__init__(key)
        self.ordered = ordered
        self.allow_extra = allow_extra
        self.arguments = arguments

    def matches(self, expected: Mapping[str, Any], actual: Mapping[str, Any]) -> bool:
        """Whether the call ``actual`` satisfies the expected call ``expected``."""
        if actual.get("name") != expected.get("name"):
            return False
        if "arguments" not in expected:
            return True
        want, got = _arguments(expected), _arguments(actual)
        if got is _NOT_JSON or not isinstance(want, Mapping) or not isinstance(got, Mapping):
            return want is not _NOT_JSON and got is not _NOT_JSON and json_equal(want, got)
        if self.arguments == "exact":
            return json_equal(want, got)
        return all(name in got and json_equal(value, got[name]) for name, value in want.items())

    def assign(
        self, expected: Sequence[Mapping[str, Any]], actual: Sequence[Mapping[str, Any]]
    ) -> list[int | None]:
        """For each expected call, the index of the actual call matched to it (or ``None``)."""
        if self.ordered:
            # Greedy earliest match is optimal for a subsequence: it leaves the most room.
            result: list[int | None] = []
            start = 0
            for want in expected:
                found = next(
                    (i for i in range(start, len(actual)) if self.matches(want, actual[i])), None
                )
                result.append(found)
                if found is not None:
                    start = found + 1
            return result
        # Bipartite matching (augmenting paths): a loose expected call must not take the one
        # actual call a stricter expected call needs.
        owner: dict[int, int] = {}

        def augment(e: int, seen: set[int]) -> bool:
            for i, call in enumerate(actual):
                if i in seen or not self.matches(expected[e], call):
                    continue
                seen.add(i)
                if i not in owner or augment(owner[i], seen):
                    owner[i] = e
                    return True
            return False

        for e in range(len(expected)):
            augment(e, set())
        by_expected = {e: i for i, e in owner.items()}
        return [by_expected.get(e) for e in range(len(expected))]

    async def evaluate(self, case: EvalCase) -> EvalScore:
        expected = case.expected.get("tool_calls")
        if expected is None:
            return self.not_applicable("no expected.tool_calls")
        if not isinstance(expected, (list, tuple)) or not all(
            isinstance(c, Mapping) and isinstance(c.get("name"), str) for c in expected
        ):
            return self.not_applicable('expected.tool_calls must be a list of {"name", ...}')
        actual = [c for c in case.tool_calls if isinstance(c, Mapping)]
        assigned = self.assign(expected, actual)
        missing = [_describe(c) for c, i in zip(expected, assigned, strict=True) if i is None]
        used = {i for i in assigned if i is not None}
        extra = [_describe(c) for i, c in enumerate(actual) if i not in used]
        problems = []
        if missing:
            order = " in that order" if self.ordered and len(expected) > 1 else ""
            problems.append(f"not called{order}: " + ", ".join(missing))
        if extra and not self.allow_extra:
            problems.append("unexpected: " + ", ".join(extra))
        if problems:
            return self.check(False, "; ".join(problems))
        if not expected:
            return self.check(True, "no tool was called, as expected")
        return self.check(True, f"all {len(expected)} expected call(s) made")


def _tool_call_match(spec: EvaluatorSpec) -> ToolCallMatchEvaluator:
    p = spec.params
    return ToolCallMatchEvaluator(
        spec.key, ordered=p["ordered"], allow_extra=p["allow_extra"], arguments=p["arguments"]
    )


TYPES: tuple[EvaluatorType, ...] = (
    EvaluatorType(
        key="tool_call_match",
        label="Tool calls",
        factory=_tool_call_match,
        description="Passes when the tools in expected.tool_calls were called, with the "
        "expected arguments when given.",
        params_schema=object_schema(
            {
                "ordered": {
                    "type": "boolean",
                    "default": False,
                    "description": "The expected calls must be made in their order.",
                },
                "allow_extra": {
                    "type": "boolean",
                    "default": True,
                    "description": "Calls beyond the expected ones are allowed.",
                },
                "arguments": {
                    "enum": ["subset", "exact"],
                    "default": "subset",
                    "description": "subset: the expected arguments must be present with "
                    "equal values (others may be too); exact: the arguments must be exactly "
                    "the expected ones.",
                },
            }
        ),
    ),
)
