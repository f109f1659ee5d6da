"""Conversation ids and the metadata flags of interrupted turns, shared by all memory code.

Every memory component (repositories, ``ChatMemory`` implementations, memory advisors) checks a
conversation id with :func:`check_conversation_id`, so a blank id is rejected in one place with
one message (fix for Spring AI defect 5.3.22, where ``""`` passes the advisor and fails later in
``ChatMemory`` with another message, and any object is accepted through ``toString()``).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "APPROVAL_PENDING",
    "CANCELLED",
    "ERROR",
    "FINISH_REASON",
    "INTERRUPTED",
    "MAX_CONVERSATION_ID_LENGTH",
    "check_conversation_id",
]

#: Longest conversation id any repository accepts (the Django column is ``varchar(255)``;
#: Spring AI's JDBC schema stops at 36 characters, defect 5.3.21).
MAX_CONVERSATION_ID_LENGTH = 255

#: Message-metadata key set to ``True`` on an assistant reply cut short by a cancel or an error.
INTERRUPTED = "interrupted"
#: Message-metadata key: why an interrupted reply stopped, :data:`CANCELLED` or :data:`ERROR`.
FINISH_REASON = "finish_reason"
#: The consumer closed the stream or its task was cancelled (client gone, "stop", timeout).
CANCELLED = "cancelled"
#: The provider (or an inner advisor) raised while the reply was streaming.
ERROR = "error"
#: Message-metadata key set to ``True`` on a stored assistant tool-call message whose calls wait
#: for a person's approval (finish reason ``APPROVAL_REQUIRED``). What makes it pending is its
#: place: the last stored message, with tool calls and no tool response after it.
APPROVAL_PENDING = "approval_pending"


def check_conversation_id(
    conversation_id: Any, *, none_message: str = "conversationId cannot be null"
) -> str:
    """Return ``conversation_id`` if it is a usable id, else raise ``ValueError``.

    A usable id is a ``str`` with a non-whitespace character and at most
    :data:`MAX_CONVERSATION_ID_LENGTH` characters. Messages: ``"conversationId cannot be null"``
    (``None``, Spring AI's text), ``"conversationId cannot be null or empty"`` (blank, Spring AI's
    ``ChatMemory`` text), and one naming the type or the length for the other cases.
    ``none_message`` replaces the first (``ChatMemory`` says "... null or empty" for ``None`` too).
    """
    if conversation_id is None:
        raise ValueError(none_message)
    if not isinstance(conversation_id, str):
        raise ValueError(
            f"conversationId must be a string, got {type(conversation_id).__name__} "
            f"{conversation_id!r}; pass str(value) if that is the id you mean"
        )
    if not conversation_id.strip():
        raise ValueError("conversationId cannot be null or empty")
    if len(conversation_id) > MAX_CONVERSATION_ID_LENGTH:
        raise ValueError(
            f"conversationId must be at most {MAX_CONVERSATION_ID_LENGTH} characters, "
            f"got {len(conversation_id)}"
        )
    return conversation_id
