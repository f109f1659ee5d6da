"""Tools: ``@tool`` callbacks, a registry of named tools, and the tool-calling manager.

Spring AI ``org.springframework.ai.tool`` and ``org.springframework.ai.model.tool``. The loop
that sends tool results back to the model is the ``ToolCallingAdvisor``
(``advisors_app.core.advisors``); human approval of tool calls is in :mod:`.approval`; tool
search indexes are in :mod:`.search`.
"""

from __future__ import annotations

from ..exceptions import ToolCallLimitExceededError
from .approval import (
    ApprovalDecision,
    ApprovalRequirement,
    PendingToolCall,
    ToolApprovalRequiredError,
    ToolCallConfirmationPolicy,
    ToolCallDecision,
    ToolCallDecisionError,
)
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
    "ApprovalDecision",
    "ApprovalRequirement",
    "FunctionToolCallback",
    "PendingToolCall",
    "ToolApprovalRequiredError",
    "ToolArgumentsError",
    "ToolCallConfirmationPolicy",
    "ToolCallDecision",
    "ToolCallDecisionError",
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
