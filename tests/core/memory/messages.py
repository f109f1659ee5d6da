"""Short constructors for the messages of memory tests (the notation of bug-cases.md)."""

from __future__ import annotations

from advisors_app.core import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)


def S(text: str) -> SystemMessage:
    return SystemMessage(text)


def U(text: str) -> UserMessage:
    return UserMessage(text)


def A(text: str) -> AssistantMessage:
    return AssistantMessage(text)


def call(*ids: str, name: str = "get_weather") -> AssistantMessage:
    """``A[call t1 ...]``: an assistant message carrying one tool call per id."""
    return AssistantMessage("", tool_calls=[ToolCall(i, name, '{"city": "Oslo"}') for i in ids])


def T(*ids: str, data: str = "sunny") -> ToolResponseMessage:
    """``T[t1 ...]``: the responses to the calls with these ids."""
    return ToolResponseMessage([ToolResponse(i, "get_weather", data) for i in ids])
