"""The project's tools: chains enable them by name, so they are registered here, in code.

A project registers its tools from an ``AppConfig.ready()``::

    from advisors_app.core.tools import tool
    from advisors_app.definition.tools import tool_registry

    @tool(description="The weather in a city")
    def get_weather(city: str) -> str: ...

    tool_registry.register(get_weather)

The admin offers these names for a chain's ``tools``; the runtime hands the registry to the
chain's tool loop (``ToolCallingManager(tool_registry=...)``), so the database only ever holds
names, never code.
"""

from __future__ import annotations

from advisors_app.core.tools import ToolRegistry

__all__ = ["tool_registry"]

#: Every tool chains of this process may enable, by name.
tool_registry = ToolRegistry()
