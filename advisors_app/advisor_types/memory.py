"""Built-in chat-memory types: conversation history as messages or in the system text."""

from __future__ import annotations

from typing import Any

from advisors_app.core.advisor import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
)
from advisors_app.registry import AdvisorSpec, AdvisorType

from ._schema import BuiltinTypes, advisor, object_schema

__all__ = ["TYPES"]


def _message_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    return advisor("message_chat_memory", "MessageChatMemoryAdvisor")(memory, order=spec.order)


def _prompt_chat_memory(spec: AdvisorSpec) -> Any:
    memory = spec.chat_memory(max_messages=spec.params["max_messages"])
    slug = spec.params.get("system_prompt_template")
    template = spec.template(slug) if slug else None
    return advisor("prompt_chat_memory", "PromptChatMemoryAdvisor")(
        memory, system_prompt_template=template, order=spec.order
    )


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
            default_order=DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
            roles=frozenset({"memory"}),
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
            default_order=DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
            roles=frozenset({"memory"}),
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
