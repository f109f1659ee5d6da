"""Chat memory: repositories that store conversations and memories that window them.

Spring AI ``ChatMemory``, ``ChatMemoryRepository``, ``MessageWindowChatMemory`` and
``InMemoryChatMemoryRepository`` (reference §3.7, seed §6.3), with the fixes of reference §5.3.
A turn that failed or was interrupted is either not stored at all or stored with
``metadata["interrupted"] = True`` and the reason under ``metadata["finish_reason"]``
(:data:`INTERRUPTED`, :data:`FINISH_REASON`; see ``BaseChatMemoryAdvisor``).
"""

from __future__ import annotations

from .chat_memory import (
    DEFAULT_MAX_MESSAGES,
    ChatMemory,
    MessageWindowChatMemory,
    TokenWindowChatMemory,
)
from .history import RequestHistory, align_request
from .ids import (
    APPROVAL_PENDING,
    CANCELLED,
    ERROR,
    FINISH_REASON,
    INTERRUPTED,
    MAX_CONVERSATION_ID_LENGTH,
    check_conversation_id,
)
from .in_memory import InMemoryChatMemoryRepository
from .repository import ChatMemoryRepository
from .window import drop_orphan_tool_responses, select_window, window_positions

__all__ = [
    "APPROVAL_PENDING",
    "CANCELLED",
    "DEFAULT_MAX_MESSAGES",
    "ERROR",
    "FINISH_REASON",
    "INTERRUPTED",
    "MAX_CONVERSATION_ID_LENGTH",
    "ChatMemory",
    "ChatMemoryRepository",
    "InMemoryChatMemoryRepository",
    "MessageWindowChatMemory",
    "RequestHistory",
    "TokenWindowChatMemory",
    "align_request",
    "check_conversation_id",
    "drop_orphan_tool_responses",
    "select_window",
    "window_positions",
]
