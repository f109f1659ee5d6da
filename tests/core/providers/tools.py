"""A real ``@tool`` for provider tests: providers only describe it to the model."""

from __future__ import annotations

from typing import Any

from advisors_app.core.tools import tool


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city."""
    return f"Sunny, 22 °C in {city}"


WEATHER = get_weather
WEATHER_SCHEMA: dict[str, Any] = dict(WEATHER.definition.input_schema)

#: Explicit enough that SmolLM2 calls the tool whatever its prompt cache holds (a plain
#: "What's the weather like in Paris today?" flips between a call and prose across runs).
QUESTION = "What's the weather in Paris? Use the get_weather tool."
