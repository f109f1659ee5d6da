"""What travels through the advisor chain (Spring AI ``ChatClientRequest``/``ChatClientResponse``).

Both are frozen. ``context`` is a read-only mapping: ``None`` values are allowed, ``None`` keys
are rejected. Changes go through :meth:`mutate`, which merges context keys into a new object, so
nothing an inner advisor writes can appear on an object an outer advisor already holds (fix
for Spring AI defects 5.1.7 and 5.1.8).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .mappings import EMPTY, freeze, merged
from .prompt import Prompt
from .response import ChatResponse

__all__ = ["ChatClientRequest", "ChatClientResponse"]


@dataclass(frozen=True, slots=True)
class ChatClientRequest:
    """A prompt plus the advisor context (advisor params, and whatever advisors add)."""

    prompt: Prompt
    context: Mapping[str, Any] = field(default=EMPTY)

    def __post_init__(self) -> None:
        if self.prompt is None:
            raise ValueError("prompt cannot be null")
        object.__setattr__(self, "context", freeze(self.context))

    def mutate(
        self, *, prompt: Prompt | None = None, context: Mapping[str, Any] | None = None
    ) -> ChatClientRequest:
        """Return a new request: ``prompt`` replaces, ``context`` keys merge over the old ones."""
        return ChatClientRequest(
            self.prompt if prompt is None else prompt,
            merged(self.context, context) if context else self.context,
        )

    def copy(self) -> ChatClientRequest:
        return ChatClientRequest(self.prompt.copy(), self.context)


@dataclass(frozen=True, slots=True)
class ChatClientResponse:
    """A model response plus the advisor context; ``chat_response`` may be ``None``.

    A response with ``chat_response=None`` or with no generations carries only context or
    metadata (for example the trailing chunk that ``BaseAdvisor.after`` produces in a stream).
    """

    chat_response: ChatResponse | None
    context: Mapping[str, Any] = field(default=EMPTY)

    def __post_init__(self) -> None:
        object.__setattr__(self, "context", freeze(self.context))

    def mutate(
        self, *, chat_response: Any = ..., context: Mapping[str, Any] | None = None
    ) -> ChatClientResponse:
        """Return a new response: ``chat_response`` replaces, ``context`` keys merge."""
        return ChatClientResponse(
            self.chat_response if chat_response is ... else chat_response,
            merged(self.context, context) if context else self.context,
        )

    def copy(self) -> ChatClientResponse:
        return ChatClientResponse(self.chat_response, self.context)
