"""The built-in advisors, one module per Spring AI class (``safe_guard.py`` → ``SafeGuardAdvisor``).

Names resolve lazily (PEP 562) so importing one advisor does not import every other advisor's
dependencies (JSON Schema, confusables tables, vector stores).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SimpleLoggerAdvisor": "simple_logger",
    "SafeGuardAdvisor": "safe_guard",
    "DEFAULT_FAILURE_RESPONSE": "safe_guard",
    "BaseChatMemoryAdvisor": "base_chat_memory",
    "MessageChatMemoryAdvisor": "message_chat_memory",
    "PromptChatMemoryAdvisor": "prompt_chat_memory",
    "VectorStoreChatMemoryAdvisor": "vector_store_chat_memory",
    "SessionMemoryAdvisor": "session_memory",
    "SessionTurnAdvisor": "session_turn",
    "SESSION_TURN": "session_memory",
    "session_advisors": "session_turn",
    "TOP_K": "vector_store_chat_memory",
    "QuestionAnswerAdvisor": "question_answer",
    "RETRIEVED_DOCUMENTS": "question_answer",
    "FILTER_EXPRESSION": "question_answer",
    "StructuredOutputValidationAdvisor": "structured_output_validation",
    "ToolCallingAdvisor": "tool_calling",
    "ToolSearchToolCallingAdvisor": "tool_search",
    "SemanticCacheAdvisor": "semantic_cache",
    "LastMaxTokenSizeContentPurger": "last_max_token_size_content_purger",
    "BudgetGuardAdvisor": "budget_guard",
    "CitationAdvisor": "citation",
    "FallbackAdvisor": "fallback",
    "PiiMaskingAdvisor": "pii_masking",
    "AuditAdvisor": "audit",
    "TimingAdvisor": "timing",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
