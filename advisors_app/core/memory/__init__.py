"""Chat memory: repositories that store conversations and memories that window them.

Session memory (Spring AI 2.1, :mod:`.session` and :mod:`.compaction`) is the newer API: an
append-only log with boundary events and turn-aware compaction; ``ChatMemory`` and its windows
are the 2.0 API, kept as the compatibility layer. A host that stores turns itself hands both a
:class:`TurnMemory` (:mod:`.turn`): the conversation it read, and a hold for what they store.

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
from .compaction import (
    CompactionPolicy,
    CompactionResult,
    KeyFactsCompactionStrategy,
    MessageCountTrigger,
    RecursiveSummarizationCompactionStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
    WindowCompactionStrategy,
    compact_session,
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
from .session import (
    COMPACTION,
    Boundary,
    InMemorySessionRepository,
    SessionRepository,
    SessionView,
    turn_starts,
)
from .turn import CompactionRequest, HeldAppend, ReadAhead, TurnMemory, turn_memory_of
from .window import drop_orphan_tool_responses, select_window, window_positions

__all__ = [
    "APPROVAL_PENDING",
    "CANCELLED",
    "COMPACTION",
    "DEFAULT_MAX_MESSAGES",
    "ERROR",
    "FINISH_REASON",
    "INTERRUPTED",
    "MAX_CONVERSATION_ID_LENGTH",
    "Boundary",
    "ChatMemory",
    "ChatMemoryRepository",
    "CompactionPolicy",
    "CompactionRequest",
    "CompactionResult",
    "HeldAppend",
    "InMemoryChatMemoryRepository",
    "InMemorySessionRepository",
    "KeyFactsCompactionStrategy",
    "MessageCountTrigger",
    "MessageWindowChatMemory",
    "ReadAhead",
    "RecursiveSummarizationCompactionStrategy",
    "RequestHistory",
    "SessionRepository",
    "SessionView",
    "TokenCountTrigger",
    "TokenWindowChatMemory",
    "TurnCountTrigger",
    "TurnMemory",
    "WindowCompactionStrategy",
    "align_request",
    "check_conversation_id",
    "compact_session",
    "drop_orphan_tool_responses",
    "select_window",
    "turn_memory_of",
    "turn_starts",
    "window_positions",
]
