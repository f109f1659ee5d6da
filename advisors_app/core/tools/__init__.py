"""Tools: ``@tool`` callbacks, a registry of named tools, and the tool-calling manager.

Spring AI ``org.springframework.ai.tool`` and ``org.springframework.ai.model.tool``. The loop
that sends tool results back to the model is the ``ToolCallingAdvisor``
(``advisors_app.core.advisors``); tool search indexes are in :mod:`.search`.
"""

from __future__ import annotations

from ..exceptions import ToolCallLimitExceededError
from .callback import (
    FunctionToolCallback,
    ToolArgumentsError,
    ToolCallback,
    ToolContext,
    ToolDefinition,
    convert_tool_result,
    tool,
)
from .manager import (
    ToolCallingManager,
    ToolCallLimitBehavior,
    ToolExecutionResult,
    canonical_arguments,
)
from .registry import ToolRegistry

__all__ = [
    "FunctionToolCallback",
    "ToolArgumentsError",
    "ToolCallLimitBehavior",
    "ToolCallLimitExceededError",
    "ToolCallback",
    "ToolCallingManager",
    "ToolContext",
    "ToolDefinition",
    "ToolExecutionResult",
    "ToolRegistry",
    "canonical_arguments",
    "convert_tool_result",
    "tool",
]
