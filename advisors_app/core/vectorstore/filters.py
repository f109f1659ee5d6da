"""Filter expressions over document metadata (Spring AI ``Filter.Expression``).

A filter is a tree of immutable nodes that users build directly or get from
:class:`~advisors_app.core.vectorstore.parser.FilterExpressionTextParser`::

    And(Eq("tenant", "t1"), Gte("year", 2020))   ==   parse("tenant == 't1' && year >= 2020")

Leaves compare one metadata key with a constant (a string, a number or a boolean); ``In`` /
``Nin`` take a non-empty list of constants; ``IsNull`` / ``IsNotNull`` test for a missing or
``null`` value. ``And`` / ``Or`` take two or more operands and flatten nested nodes of their
own kind, so ``a && b && c`` and ``And(a, b, c)`` are equal.

Semantics (the same in every store; :meth:`Filter.matches` is the reference): a key names a
**top-level** metadata key as written (``"a.b"`` is the key ``"a.b"``, as Spring's parser
produces it). A comparison holds only when the stored value has the constant's JSON type
(numbers compare with numbers whatever int/float, strings with strings by code point, booleans
with booleans); a missing key or a value of another type makes it false. ``Ne`` is
``Not(Eq)`` and ``Nin`` is ``Not(In)``, so both hold for a missing key: the logic is two-valued
(SQL's three-valued NULL never leaks into results).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

__all__ = [
    "And",
    "Comparison",
    "Eq",
    "Filter",
    "Gt",
    "Gte",
    "In",
    "IsNotNull",
    "IsNull",
    "Lt",
    "Lte",
    "Ne",
    "Nin",
    "Not",
    "Or",
    "Scalar",
    "json_kind",
]

Scalar: TypeAlias = str | int | float | bool

_MISSING = object()


def json_kind(value: Any) -> str:
    """The JSON type name of ``value`` as PostgreSQL's ``jsonb_typeof`` spells it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    return "array"


def _check_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"filter key must be a non-empty string, got {key!r}")
    return key


def _check_scalar(value: Any) -> Scalar:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"filter value must be a finite number, got {value!r}")
    if not isinstance(value, (str, int, float, bool)):
        raise ValueError(
            f"filter value must be a string, a number or a boolean, got {type(value).__name__}"
        )
    return value


class Filter:
    """Base of every filter node; :meth:`matches` evaluates it against a metadata mapping."""

    __slots__ = ()

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        raise NotImplementedError

    def __and__(self, other: Filter) -> And:
        return And(self, other)

    def __or__(self, other: Filter) -> Or:
        return Or(self, other)

    def __invert__(self) -> Not:
        return Not(self)


@dataclass(frozen=True, slots=True)
class Comparison(Filter):
    """``key <op> value``; subclasses set the operator."""

    key: str
    value: Scalar
    symbol: ClassVar[str] = "?"
    ordered: ClassVar[bool] = False

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_scalar(self.value)

    def _holds(self, stored: Any) -> bool:
        raise NotImplementedError

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        stored = metadata.get(self.key, _MISSING)
        if stored is _MISSING or json_kind(stored) != json_kind(self.value):
            return False
        return self._holds(stored)

    def __str__(self) -> str:
        return f"{self.key} {self.symbol} {self.value!r}"


class Eq(Comparison):
    """``key == value``."""

    __slots__ = ()
    symbol = "=="

    def _holds(self, stored: Any) -> bool:
        return bool(stored == self.value)


class Gt(Comparison):
    """``key > value``."""

    __slots__ = ()
    symbol = ">"
    ordered = True

    def _holds(self, stored: Any) -> bool:
        return bool(stored > self.value)


class Gte(Comparison):
    """``key >= value``."""

    __slots__ = ()
    symbol = ">="
    ordered = True

    def _holds(self, stored: Any) -> bool:
        return bool(stored >= self.value)


class Lt(Comparison):
    """``key < value``."""

    __slots__ = ()
    symbol = "<"
    ordered = True

    def _holds(self, stored: Any) -> bool:
        return bool(stored < self.value)


class Lte(Comparison):
    """``key <= value``."""

    __slots__ = ()
    symbol = "<="
    ordered = True

    def _holds(self, stored: Any) -> bool:
        return bool(stored <= self.value)


@dataclass(frozen=True, slots=True)
class Ne(Filter):
    """``key != value``: true unless the key holds exactly ``value`` (so true when missing)."""

    key: str
    value: Scalar

    def __post_init__(self) -> None:
        _check_key(self.key)
        _check_scalar(self.value)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return not Eq(self.key, self.value).matches(metadata)

    def __str__(self) -> str:
        return f"{self.key} != {self.value!r}"


def _values(values: Any) -> tuple[Scalar, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"in/nin take a list of values, got {values!r}")
    checked = tuple(_check_scalar(v) for v in values)
    if not checked:
        raise ValueError("in/nin take at least one value")
    return checked


@dataclass(frozen=True, slots=True)
class In(Filter):
    """``key in [v1, v2, ...]``: the key equals one of the values."""

    key: str
    values: tuple[Scalar, ...]

    def __post_init__(self) -> None:
        _check_key(self.key)
        object.__setattr__(self, "values", _values(self.values))

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return any(Eq(self.key, v).matches(metadata) for v in self.values)

    def __str__(self) -> str:
        return f"{self.key} in {list(self.values)!r}"


@dataclass(frozen=True, slots=True)
class Nin(Filter):
    """``key nin [v1, v2, ...]``: the key equals none of the values (true when missing)."""

    key: str
    values: tuple[Scalar, ...]

    def __post_init__(self) -> None:
        _check_key(self.key)
        object.__setattr__(self, "values", _values(self.values))

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return not In(self.key, self.values).matches(metadata)

    def __str__(self) -> str:
        return f"{self.key} nin {list(self.values)!r}"


@dataclass(frozen=True, slots=True)
class IsNull(Filter):
    """``key IS NULL``: the key is missing or holds ``null``."""

    key: str

    def __post_init__(self) -> None:
        _check_key(self.key)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return metadata.get(self.key) is None

    def __str__(self) -> str:
        return f"{self.key} IS NULL"


@dataclass(frozen=True, slots=True)
class IsNotNull(Filter):
    """``key IS NOT NULL``: the key is present with a non-``null`` value."""

    key: str

    def __post_init__(self) -> None:
        _check_key(self.key)

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return metadata.get(self.key) is not None

    def __str__(self) -> str:
        return f"{self.key} IS NOT NULL"


def _operands(kind: type[Filter], operands: tuple[Any, ...]) -> tuple[Filter, ...]:
    flat: list[Filter] = []
    for operand in operands:
        if not isinstance(operand, Filter):
            raise ValueError(
                f"{kind.__name__} operands must be filter expressions, got {operand!r}"
            )
        if type(operand) is kind:
            flat.extend(operand.operands)  # type: ignore[attr-defined]
        else:
            flat.append(operand)
    if len(flat) < 2:
        raise ValueError(f"{kind.__name__} needs at least two operands")
    return tuple(flat)


class And(Filter):
    """Every operand holds (``a && b && ...``)."""

    __slots__ = ("operands",)
    operands: tuple[Filter, ...]

    def __init__(self, *operands: Filter) -> None:
        object.__setattr__(self, "operands", _operands(And, operands))

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return all(op.matches(metadata) for op in self.operands)

    def __eq__(self, other: object) -> bool:
        return type(other) is And and other.operands == self.operands

    def __hash__(self) -> int:
        return hash(("and", self.operands))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("filter expressions are immutable")

    def __repr__(self) -> str:
        return f"And({', '.join(map(repr, self.operands))})"

    def __str__(self) -> str:
        return " && ".join(_grouped(op) for op in self.operands)


class Or(Filter):
    """At least one operand holds (``a || b || ...``)."""

    __slots__ = ("operands",)
    operands: tuple[Filter, ...]

    def __init__(self, *operands: Filter) -> None:
        object.__setattr__(self, "operands", _operands(Or, operands))

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return any(op.matches(metadata) for op in self.operands)

    def __eq__(self, other: object) -> bool:
        return type(other) is Or and other.operands == self.operands

    def __hash__(self) -> int:
        return hash(("or", self.operands))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("filter expressions are immutable")

    def __repr__(self) -> str:
        return f"Or({', '.join(map(repr, self.operands))})"

    def __str__(self) -> str:
        return " || ".join(_grouped(op) for op in self.operands)


@dataclass(frozen=True, slots=True)
class Not(Filter):
    """The operand does not hold (``NOT a``)."""

    operand: Filter

    def __post_init__(self) -> None:
        if not isinstance(self.operand, Filter):
            raise ValueError(f"Not takes a filter expression, got {self.operand!r}")

    def matches(self, metadata: Mapping[str, Any]) -> bool:
        return not self.operand.matches(metadata)

    def __str__(self) -> str:
        return f"NOT ({self.operand})"


def _grouped(node: Filter) -> str:
    return f"({node})" if isinstance(node, (And, Or)) else str(node)
