"""The demo tools: arithmetic without eval, the UTC time, the Python version; registered."""

from __future__ import annotations

import datetime
import json
import platform

import pytest

from advisors_app.core.tools import ToolRegistry
from advisors_app.definition.tools import tool_registry
from advisors_app.demo.tools import (
    DEMO_TOOLS,
    MAX_EXPRESSION_CHARS,
    calculate,
    calculator,
    current_utc_time,
    python_version,
    register_demo_tools,
)


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 * (3 + 4) ** 2", 98),
        ("1 / 4", 0.25),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("-3 ** 2", -9),
        ("+5 - -5", 10),
        ("2 ** -1", 0.5),
        ("1.5e3 + 0.5", 1500.5),
        ("2 ** 100", 2**100),
        ("0x1F + 0b11", 34),
    ],
)
def test_the_calculator_computes_arithmetic(expression: str, value: float) -> None:
    assert calculate(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('true')", "Call is not allowed"),
        ("print(1)", "Call is not allowed"),
        ("(1).real", "Attribute is not allowed"),
        ("x + 1", "Name is not allowed"),
        ("'a' * 3", "only numbers"),
        ("True + 1", "only numbers"),
        ("1 < 2", "Compare is not allowed"),
        ("[1, 2]", "List is not allowed"),
        ("lambda: 1", "Lambda is not allowed"),
        ("2 << 3", "BinOp is not allowed"),
        ("9 ** 9 ** 9", "more than 1000 digits"),
        ("10 ** 1000", "more than 1000 digits"),
        ("(10 ** 999) * (10 ** 999)", "more than 1000 digits"),
        ("10.0 ** 400", "too large"),
        ("(-8) ** 0.5", "not a real number"),
        ("1 / 0", "division by zero"),
        ("5 % 0", "division by zero"),
        ("1 +", "not an arithmetic expression"),
        ("1" * (MAX_EXPRESSION_CHARS + 1), "longer than"),
    ],
)
def test_the_calculator_refuses_everything_else(expression: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        calculate(expression)


async def test_the_calculator_tool_takes_json_arguments_and_answers_text() -> None:
    assert await calculator.call(json.dumps({"expression": "6 * 7"})) == "42"
    schema = calculator.definition.input_schema
    assert schema["required"] == ["expression"]
    assert schema["additionalProperties"] is False
    with pytest.raises(ValueError, match="not allowed"):
        await calculator.call(json.dumps({"expression": "open('/etc/passwd')"}))


async def test_the_clock_and_the_version() -> None:
    now = datetime.datetime.fromisoformat(await current_utc_time.call("{}"))
    assert now.utcoffset() == datetime.timedelta(0)
    assert abs(datetime.datetime.now(datetime.UTC) - now) < datetime.timedelta(minutes=1)
    assert platform.python_version() in await python_version.call("")


def test_the_tools_are_in_the_project_registry_by_name() -> None:
    names = [callback.name for callback in DEMO_TOOLS]
    assert names == [
        "calculator",
        "current_utc_time",
        "python_version",
        "save_note",
        "list_notes",
    ]
    assert all(tool_registry.get(c.name) is c for c in DEMO_TOOLS)
    registry = ToolRegistry()
    register_demo_tools(registry)
    register_demo_tools(registry)  # idempotent
    assert registry.names == tuple(names)
