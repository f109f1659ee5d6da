"""Built-in tool-loop types: the tool-calling loop and the tool-search loop."""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisors.tool_calling import ToolCallingAdvisor
from advisors_app.core.advisors.tool_search import ToolSearchToolCallingAdvisor
from advisors_app.definition.registry import AdvisorSpec, AdvisorType

from ._schema import BuiltinTypes, object_schema

__all__ = ["TYPES"]


def _tool_manager(params: Any) -> Any:
    from advisors_app.core.tools import ToolCallConfirmationPolicy, ToolCallingManager
    from advisors_app.definition.tools import tool_registry

    return ToolCallingManager(
        params["max_calls_per_tool"],
        params["max_total_tool_calls"],
        max_identical_calls=params["max_identical_calls"],
        tool_registry=tool_registry,
        confirmation_policy=ToolCallConfirmationPolicy.from_params(params["approval"]),
    )


def _tool_calling(spec: AdvisorSpec) -> Any:
    return ToolCallingAdvisor(
        _tool_manager(spec.params),
        conversation_history_enabled=spec.params["conversation_history_enabled"],
        order=spec.order,
        round_streaming=spec.params["round_streaming"],
    )


def _tool_search(spec: AdvisorSpec) -> Any:
    from advisors_app.core.tools.search import KeywordToolIndex, RegexToolIndex

    params = spec.params
    index_class = KeywordToolIndex if params["index"] == "keyword" else RegexToolIndex
    return ToolSearchToolCallingAdvisor(
        index_class(max_results=params["max_results"]),
        tool_calling_manager=_tool_manager(params),
        conversation_history_enabled=params["conversation_history_enabled"],
        order=spec.order,
        round_streaming=params["round_streaming"],
    )


_TOOL_LOOP = {
    "max_calls_per_tool": {"type": "integer", "minimum": 1, "default": 40},
    "max_total_tool_calls": {"type": "integer", "minimum": 1, "default": 150},
    "max_identical_calls": {
        "type": ["integer", "null"],
        "minimum": 1,
        "default": 3,
        "description": "Same tool with the same arguments, per turn (null: no limit).",
    },
    "approval": {
        "type": "object",
        "default": {},
        "additionalProperties": {
            "oneOf": [
                {"enum": ["always", "never"]},
                {
                    "type": "object",
                    "properties": {
                        "when": {"type": ["object", "boolean"]},
                        "reason": {"type": "string"},
                        "allowed_decisions": {
                            "type": "array",
                            "items": {"enum": ["approve", "edit", "reject"]},
                            "minItems": 1,
                            "uniqueItems": True,
                        },
                    },
                    "required": ["when"],
                    "additionalProperties": False,
                },
            ]
        },
        "description": (
            'Tool calls that wait for a person\'s approval, by tool name: "always", '
            '"never" (overrides the tool\'s own declaration) or {"when": <JSON Schema over '
            'the arguments>, "reason"?, "allowed_decisions"?}. The chain needs a '
            "MessageChatMemory advisor ordered before the loop: a paused turn resumes from it."
        ),
    },
    "approvers": {
        "type": "string",
        "default": "",
        "pattern": "^([a-z_][a-z0-9_]*\\.[a-z_][a-z0-9_]*)?$",
        "description": (
            "Who may decide: empty for the caller (or a holder of "
            'advisors_app.decide_toolapproval); a permission "app_label.codename" for its '
            "holders only."
        ),
    },
    "mcp_servers": {
        "type": "array",
        "default": [],
        "items": {
            "type": "object",
            "properties": {
                "server": {"type": "string", "minLength": 1, "x-reference": "mcp_server"},
                "tools": {
                    "type": "array",
                    "items": {"type": "string", "minLength": 1},
                    "minItems": 1,
                    "uniqueItems": True,
                },
                "prefix": {"type": "string", "pattern": "^[A-Za-z0-9_-]{0,40}$", "default": ""},
            },
            "required": ["server", "tools"],
            "additionalProperties": False,
        },
        "description": (
            'Tools of MCP servers: [{"server": <MCP server slug>, "tools": [<tool names>], '
            '"prefix": ""}]. Only the listed tools are offered, as prefix + name; their '
            "descriptions and schemas are pinned when the chain is published."
        ),
    },
    "conversation_history_enabled": {"type": "boolean", "default": True},
    "round_streaming": {
        "type": "string",
        "enum": ["first_content", "hold", "eager"],
        "default": "first_content",
        "description": (
            "How a streamed round's text is released: first_content (a round that starts with "
            "text streams, one that starts with a tool call stays hidden), hold (every round is "
            "held until it ends: no text before a tool call ever shows) or eager (as Spring AI)."
        ),
    },
}


TYPES: BuiltinTypes = (
    (
        "tool_calling",
        lambda: AdvisorType(
            key="tool_calling",
            label="Tool calling loop",
            factory=_tool_calling,
            advisor_class=ToolCallingAdvisor,
            description="Runs the tools the model calls and sends their results back until "
            "it answers (ToolCallingAdvisor). Added automatically to chains with tools.",
            params_schema=object_schema(dict(_TOOL_LOOP)),
        ),
    ),
    (
        "tool_search",
        lambda: AdvisorType(
            key="tool_search",
            label="Tool search loop",
            factory=_tool_search,
            advisor_class=ToolSearchToolCallingAdvisor,
            description="Offers one search tool instead of every tool; the tools it finds "
            "are offered next (ToolSearchToolCallingAdvisor).",
            params_schema=object_schema(
                {
                    "index": {"enum": ["keyword", "regex"], "default": "keyword"},
                    "max_results": {"type": "integer", "minimum": 1, "default": 10},
                    **_TOOL_LOOP,
                }
            ),
        ),
    ),
)
