"""@tool: schemas from type hints, validation before the call, results as text, tool context."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Literal

import pydantic
import pytest
from pydantic import Field

from advisors_app.core.tools import ToolArgumentsError, ToolContext, ToolDefinition, tool


class Unit(enum.Enum):
    C = "c"
    F = "f"


class Place(pydantic.BaseModel):
    city: str
    country: str = "FR"


@dataclasses.dataclass
class Reading:
    degrees: float
    unit: Unit


@tool
def forecast(
    place: Place,
    days: Annotated[int, Field(ge=1, le=7, description="How many days")] = 1,
    unit: Unit = Unit.C,
    mode: Literal["brief", "full"] = "brief",
) -> list[Reading]:
    """Forecast for a place.

    One reading per day.
    """
    return [Reading(20.5, unit)] * days


def test_schema_comes_from_type_hints_and_docstring():
    definition = forecast.definition
    assert definition.name == "forecast"
    assert definition.description == "Forecast for a place.\n\nOne reading per day."
    schema = definition.input_schema
    assert schema["type"] == "object"
    assert schema["required"] == ["place"]
    assert schema["additionalProperties"] is False
    days = schema["properties"]["days"]
    assert days == {
        "type": "integer",
        "minimum": 1,
        "maximum": 7,
        "default": 1,
        "description": "How many days",
    }
    assert schema["properties"]["mode"]["enum"] == ["brief", "full"]
    assert "title" not in days and "title" not in schema
    assert set(schema["$defs"]) == {"Place", "Unit"}


async def test_arguments_are_validated_and_converted_before_the_call():
    text = await forecast.call('{"place": {"city": "Paris"}, "days": "2", "unit": "f"}')
    assert text == '[{"degrees":20.5,"unit":"f"},{"degrees":20.5,"unit":"f"}]'
    with pytest.raises(ToolArgumentsError) as error:
        await forecast.call('{"place": {}, "days": 9}')
    assert str(error.value) == (
        "invalid arguments for tool 'forecast': place.city: Field required; "
        "days: Input should be less than or equal to 7"
    )


async def test_blank_arguments_mean_no_arguments():
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    assert await ping.call("") == "pong"
    assert await ping.call("  ") == "pong"
    assert ping.definition.input_schema == {
        "additionalProperties": False,
        "properties": {},
        "required": [],
        "type": "object",
    }


async def test_str_results_are_sent_as_is_and_the_rest_as_json():
    @tool
    def echo(value: str, as_json: bool = False) -> object:
        """Echo."""
        return {"v": value} if as_json else value

    @tool
    def nothing() -> None:
        """Nothing."""

    assert await echo.call('{"value": "a \\"quoted\\" text"}') == 'a "quoted" text'
    assert await echo.call('{"value": "x", "as_json": true}') == '{"v":"x"}'
    assert await nothing.call("{}") == "null"


async def test_options_context_parameter_and_parameter_names_that_shadow_basemodel():
    @tool(name="lookup", description="Find a record.", return_direct=True)
    async def find(schema: str, json: int, context: ToolContext) -> str:
        return f"{schema}/{json}/{context['tenant']}"

    assert find.definition == ToolDefinition("lookup", "Find a record.")
    assert find.return_direct is True
    assert set(find.definition.input_schema["properties"]) == {"schema", "json"}
    assert await find.call('{"schema": "s", "json": 3}', {"tenant": "t1"}) == "s/3/t1"
    # The decorated function stays a plain function.
    assert await find("a", 1, ToolContext({"tenant": "x"})) == "a/1/x"


def test_unsupported_signatures_fail_at_decoration():
    with pytest.raises(TypeError, match="needs a type annotation"):

        @tool
        def untyped(x) -> str:
            return x

    with pytest.raises(TypeError, match=r"\*args and \*\*kwargs"):

        @tool
        def star(*args: int) -> str:
            return ""

    with pytest.raises(TypeError, match="positional-only"):

        @tool
        def positional(x: int, /) -> str:
            return ""


def test_definition_requires_a_name():
    with pytest.raises(ValueError, match="name cannot be null or empty"):
        ToolDefinition(" ", "d")
    assert ToolDefinition("n", "d").input_schema_json == (
        '{"properties":{},"required":[],"type":"object"}'
    )
