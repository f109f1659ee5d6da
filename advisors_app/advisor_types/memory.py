"""Built-in chat-memory types: conversation history as messages or in the system text."""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisors.message_chat_memory import MessageChatMemoryAdvisor
from advisors_app.core.advisors.prompt_chat_memory import PromptChatMemoryAdvisor
from advisors_app.registry import AdvisorSpec, AdvisorType

from ._schema import BuiltinTypes, object_schema

__all__ = ["TYPES"]


def _message_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    return MessageChatMemoryAdvisor(memory, order=spec.order)


def _prompt_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    slug = spec.params.get("system_prompt_template")
    template = spec.template(slug) if slug else None
    return PromptChatMemoryAdvisor(memory, system_prompt_template=template, order=spec.order)


_MAX_MESSAGES = {
    "type": "integer",
    "minimum": 1,
    "maximum": 1000,
    "default": 20,
    "description": "Newest messages sent as history (whole turns).",
}


TYPES: BuiltinTypes = (
    (
        "message_chat_memory",
        lambda: AdvisorType(
            key="message_chat_memory",
            label="Chat memory (messages)",
            factory=_message_chat_memory,
            advisor_class=MessageChatMemoryAdvisor,
            description="Adds the conversation's history to the prompt as messages and "
            "stores each turn (MessageChatMemoryAdvisor).",
            params_schema=object_schema({"max_messages": _MAX_MESSAGES}),
        ),
    ),
    (
        "prompt_chat_memory",
        lambda: AdvisorType(
            key="prompt_chat_memory",
            label="Chat memory (in the system text)",
            factory=_prompt_chat_memory,
            advisor_class=PromptChatMemoryAdvisor,
            description="Renders the conversation's history into the system text and stores "
            "each turn (PromptChatMemoryAdvisor).",
            params_schema=object_schema(
                {
                    "max_messages": _MAX_MESSAGES,
                    "system_prompt_template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                        "x-required-placeholders": ["instructions", "memory"],
                    },
                }
            ),
        ),
    ),
)
