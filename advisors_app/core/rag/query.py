"""``Query``: the text a RAG pipeline searches for, with the chat history and context it came with.

Spring AI ``org.springframework.ai.rag.Query``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..mappings import EMPTY, freeze
from ..messages import Message

__all__ = ["Query"]


@dataclass(frozen=True, slots=True, eq=False)
class Query:
    """Immutable query text plus ``history`` (earlier messages) and ``context`` (advisor params).

    ``text`` must contain non-whitespace characters (``ValueError("text cannot be null or
    empty")``, Spring's message). Equality covers all three fields; the hash covers text and
    history, so queries can key a dict.
    """

    text: str
    history: tuple[Message, ...] = ()
    context: Mapping[str, Any] = field(default=EMPTY)

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError("text cannot be null or empty")
        if self.history is None:
            raise ValueError("history cannot be null")
        history = tuple(self.history)
        if any(m is None for m in history):
            raise ValueError("history cannot contain null elements")
        object.__setattr__(self, "history", history)
        object.__setattr__(self, "context", freeze(self.context))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Query):
            return NotImplemented
        return (self.text, self.history, self.context) == (
            other.text,
            other.history,
            other.context,
        )

    def __hash__(self) -> int:
        return hash((self.text, self.history))

    def mutate(
        self,
        *,
        text: str | None = None,
        history: Any = None,
        context: Mapping[str, Any] | None = None,
    ) -> Query:
        """A copy with a new ``text``, ``history`` or ``context`` (Spring ``query.mutate()``)."""
        return dataclasses.replace(
            self,
            text=self.text if text is None else text,
            history=self.history if history is None else tuple(history),
            context=self.context if context is None else freeze(context),
        )
