"""Filter semantics evaluated in Python: types, missing keys, two-valued negation."""

from __future__ import annotations

import pytest

from advisors_app.core.vectorstore import (
    And,
    Eq,
    Gt,
    Gte,
    In,
    IsNotNull,
    IsNull,
    Lt,
    Lte,
    Ne,
    Nin,
    Not,
    Or,
)

META = {"year": 2021, "price": 9.5, "genre": "drama", "open": True, "none": None}


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        (Eq("year", 2021), True),
        (Eq("year", 2021.0), True),
        (Eq("year", "2021"), False),
        (Eq("open", True), True),
        (Eq("open", 1), False),
        (Gt("year", 2020), True),
        (Gt("year", 2021), False),
        (Gte("price", 9.5), True),
        (Lt("genre", "e"), True),
        (Lte("genre", "drama"), True),
        (Gt("genre", 1), False),
        (Ne("genre", "drama"), False),
        (Ne("genre", "comedy"), True),
        (Ne("missing", "x"), True),
        (Eq("missing", "x"), False),
        (In("genre", ("comedy", "drama")), True),
        (In("year", ("2021",)), False),
        (Nin("genre", ("comedy",)), True),
        (Nin("missing", ("x",)), True),
        (IsNull("missing"), True),
        (IsNull("none"), True),
        (IsNull("year"), False),
        (IsNotNull("year"), True),
        (Not(Gt("missing", 1)), True),
        (And(Eq("genre", "drama"), Gte("year", 2020)), True),
        (Or(Eq("genre", "comedy"), Lt("year", 2000)), False),
    ],
)
def test_matches(expression, expected):
    assert expression.matches(META) is expected


@pytest.mark.parametrize(
    "build",
    [
        lambda: Eq("", 1),
        lambda: Eq("a", None),
        lambda: Eq("a", [1]),
        lambda: Eq("a", float("nan")),
        lambda: In("a", ()),
        lambda: In("a", "abc"),
        lambda: And(Eq("a", 1)),
        lambda: Or(Eq("a", 1), "b == 2"),
        lambda: Not("a == 1"),
    ],
)
def test_invalid_nodes_raise_value_error(build):
    with pytest.raises(ValueError):
        build()


def test_nodes_are_immutable_and_hashable():
    expression = And(Eq("a", 1), In("b", [1, 2]))
    assert expression.operands[1].values == (1, 2)
    assert hash(expression) == hash(And(Eq("a", 1), In("b", (1, 2))))
    with pytest.raises(AttributeError):
        expression.operands = ()
    assert str(expression) == "a == 1 && b in [1, 2]"
