"""Retrieval once per user turn, even when a tool loop re-enters the chain.

With Spring AI's default orders, retrieval advisors (order 0) sit *inside* the tool-calling loop
(``HIGHEST_PRECEDENCE + 300``), which calls the rest of the chain again for every tool round
(defect 5.4.28). Each round's prompt is the turn so far: the same messages up to the user's
question, then assistant tool calls and tool results. A round is recognised as a re-entry by
those tool messages after the last user message; its retrieval is then taken from a memo
instead of searching again.

The memo lives in a ``contextvars`` variable: it follows the task that runs the chain (the
tool loop's rounds run in that task, in calls and streams alike) and is invisible to other
requests. It is copy-on-write, bounded, and keyed by the advisor and the messages up to and
including the user's question, so a new question is never answered from it.
"""

from __future__ import annotations

from collections.abc import Hashable
from contextvars import ContextVar
from typing import Any

from ..messages import AssistantMessage, Message, ToolResponseMessage, UserMessage
from ..prompt import Prompt

__all__ = [
    "augmented_marker",
    "current_question",
    "last_user_index",
    "recall",
    "reentered",
    "remember",
    "turn_key",
]

_MEMO: ContextVar[tuple[tuple[Hashable, Any], ...]] = ContextVar(
    "advisors_app_rag_turn_memo", default=()
)
_MAX_ENTRIES = 16


def last_user_index(messages: tuple[Message, ...]) -> int:
    """Index of the last user message, ``-1`` when there is none."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return index
    return -1


def reentered(prompt: Prompt) -> bool:
    """True when tool calls or tool results follow the last user message (a tool round)."""
    messages = prompt.instructions
    start = last_user_index(messages)
    if start < 0:
        return False
    return any(
        isinstance(m, ToolResponseMessage) or (isinstance(m, AssistantMessage) and m.tool_calls)
        for m in messages[start + 1 :]
    )


def turn_key(owner: object, prompt: Prompt, user_text: str, *parts: Any) -> Hashable | None:
    """The memo key of this turn for ``owner``; ``None`` when it cannot be hashed."""
    messages = prompt.instructions
    end = last_user_index(messages)
    key = (id(owner), messages[:end] if end >= 0 else messages, user_text, parts)
    try:
        hash(key)
    except TypeError:
        return None
    return key


def recall(key: Hashable | None) -> Any:
    """The value remembered for ``key`` in this task, or ``None``."""
    if key is None:
        return None
    for stored, value in reversed(_MEMO.get()):
        if stored == key:
            return value
    return None


def remember(key: Hashable | None, value: Any) -> None:
    """Remember ``value`` for ``key`` in this task (the oldest entries are dropped)."""
    if key is None:
        return
    entries = tuple(e for e in _MEMO.get() if e[0] != key)
    _MEMO.set((*entries, (key, value))[-_MAX_ENTRIES:])


def augmented_marker(owner: object) -> str:
    """Metadata key an advisor sets on the user message it augmented: the original text.

    If a tool loop sends the augmented message back (some loops keep the processed prompt),
    the advisor recognises its own work and neither searches nor augments again.
    """
    return f"augmented_by_{id(owner)}"


def current_question(owner: object, prompt: Prompt) -> tuple[int, str, bool]:
    """``(index, original text, already augmented by owner)`` of the last user message.

    ``index`` is ``-1`` (and the text ``""``) when the prompt has no user message.
    """
    messages = prompt.instructions
    index = last_user_index(messages)
    if index < 0:
        return -1, "", False
    message = messages[index]
    original = message.metadata.get(augmented_marker(owner))
    if isinstance(original, str):
        return index, original, True
    return index, message.text, False
