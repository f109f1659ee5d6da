"""Test helpers shipped with the product: a recording advisor for asserting the onion order.

``ScriptedChatModel`` (``advisors_app.core.providers.scripted``) is the matching fake model.
"""

from __future__ import annotations

import json
from typing import Any

from .advisor import BaseAdvisor
from .messages import AssistantMessage, ToolCall
from .requests import ChatClientRequest, ChatClientResponse
from .response import ChatGenerationMetadata, ChatResponse, ChatResponseMetadata, Generation, Usage

__all__ = ["RecordingAdvisor", "tool_call_response"]


def tool_call_response(
    *calls: ToolCall | tuple[str, Any],
    text: str = "",
    usage: Usage | None = None,
    finish_reason: str | None = "TOOL_CALLS",
) -> ChatResponse:
    """A model response requesting tool calls, for scripting ``ScriptedChatModel``.

    Each call is a :class:`ToolCall` or a ``(name, arguments)`` pair whose arguments (a dict,
    or JSON text) get the id ``"call_<n>"`` (n counts from 1 in this response).
    """
    tool_calls = []
    for n, call in enumerate(calls, start=1):
        if not isinstance(call, ToolCall):
            name, arguments = call
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments)
            call = ToolCall(f"call_{n}", name, arguments)
        tool_calls.append(call)
    return ChatResponse(
        (
            Generation(
                AssistantMessage(text, tool_calls=tuple(tool_calls)),
                ChatGenerationMetadata(finish_reason),
            ),
        ),
        ChatResponseMetadata(usage=usage),
    )


class RecordingAdvisor(BaseAdvisor):
    """Appends ``"<name>:before"`` and ``"<name>:after"`` to ``log`` and changes nothing.

    Several advisors sharing one ``log`` list record the onion order in one place::

        log = []
        advisors = [RecordingAdvisor("a", 1, log), RecordingAdvisor("b", 2, log)]
        ...
        assert log == ["a:before", "b:before", "b:after", "a:after"]
    """

    def __init__(self, name: str, order: int = 0, log: list[str] | None = None) -> None:
        self._name = name
        self._order = order
        self.log: list[str] = [] if log is None else log

    @property
    def name(self) -> str:
        return self._name

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        self.log.append(f"{self._name}:before")
        return request

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        self.log.append(f"{self._name}:after")
        return response
