"""Tool search: per-session tool indexes and their eviction (Spring AI ``toolsearch``).

Used by ``ToolSearchToolCallingAdvisor`` (``advisors_app.core.advisors``): instead of sending
every tool to the model, it sends one ``toolSearchTool`` that queries an index.
"""

from __future__ import annotations

from .eviction import (
    AlwaysEvictStrategy,
    CompositeEvictionStrategy,
    LruEvictionStrategy,
    NeverEvictStrategy,
    ToolIndexEvictionStrategy,
    TtlEvictionStrategy,
)
from .index import (
    DEFAULT_MAX_RESULTS,
    ToolIndex,
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    tool_fingerprint,
)
from .keyword import KeywordToolIndex
from .regex import RegexToolIndex
from .vector import VectorToolIndex

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "AlwaysEvictStrategy",
    "CompositeEvictionStrategy",
    "KeywordToolIndex",
    "LruEvictionStrategy",
    "NeverEvictStrategy",
    "RegexToolIndex",
    "ToolIndex",
    "ToolIndexEvictionStrategy",
    "ToolReference",
    "ToolSearchRequest",
    "ToolSearchResponse",
    "TtlEvictionStrategy",
    "VectorToolIndex",
    "tool_fingerprint",
]
