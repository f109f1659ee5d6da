"""A tool callback shaped like Spring AI's ``ToolCallback``, for provider tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


@dataclass(frozen=True)
class ToolDefinition:
    name: str
    description: str
    input_schema: str | dict[str, Any]


@dataclass(frozen=True)
class Tool:
    """Only the definition: providers never run tools, they report the model's calls."""

    tool_definition: ToolDefinition


WEATHER = Tool(ToolDefinition("get_weather", "Get the current weather for a city.", WEATHER_SCHEMA))
