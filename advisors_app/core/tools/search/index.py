"""What a tool index stores and answers (Spring AI ``ToolIndex``, ``ToolReference``,
``ToolSearchRequest``, ``ToolSearchResponse``).

An index holds, per session, one :class:`ToolReference` per tool, and answers a free-text query
with the best-matching references, best first. Every index keeps insertion order among equal
scores, so results are deterministic.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

__all__ = [
    "DEFAULT_MAX_RESULTS",
    "ToolIndex",
    "ToolReference",
    "ToolSearchRequest",
    "ToolSearchResponse",
    "tool_fingerprint",
]

#: Results returned when neither the model nor the advisor asks for a number (Spring AI: 10).
DEFAULT_MAX_RESULTS = 10


@dataclass(frozen=True, slots=True)
class ToolReference:
    """A tool as an index sees it: its ``name`` and a ``summary`` (its description)."""

    name: str
    summary: str = ""
    category: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSearchRequest:
    """A query against one session's index; ``max_results=None`` means the index default."""

    session_id: str
    query: str
    max_results: int | None = None
    category_filter: str | None = None


@dataclass(frozen=True, slots=True)
class ToolSearchResponse:
    """The matching references, best first; ``total_matches`` counts matches before the limit."""

    tool_references: tuple[ToolReference, ...] = ()
    total_matches: int = 0

    @property
    def names(self) -> list[str]:
        return [reference.name for reference in self.tool_references]


@runtime_checkable
class ToolIndex(Protocol):
    """Per-session tool index; every method is ``async`` (indexing may embed or block)."""

    async def index_tools(self, session_id: str, tools: Sequence[ToolReference]) -> None: ...

    async def clear_index(self, session_id: str) -> None: ...

    async def search(self, request: ToolSearchRequest) -> ToolSearchResponse: ...


def tool_fingerprint(tools: Iterable[ToolReference]) -> str:
    """SHA-256 (hex) over the tools sorted by name: a changed tool set changes it."""
    digest = hashlib.sha256()
    for reference in sorted(tools, key=lambda r: r.name):
        digest.update(f"{reference.name}\0{reference.summary}\1".encode())
    return digest.hexdigest()


S = TypeVar("S")


class SessionStore(Generic[S]):
    """Thread-safe ``session id -> built index`` map; a session's entry is replaced whole.

    Building a session's structure happens outside the lock and is swapped in at once, so a
    concurrent search sees the old index or the new one, never a half-built one.
    """

    def __init__(self) -> None:
        self._sessions: dict[str, S] = {}
        self._lock = threading.Lock()

    def get(self, session_id: str) -> S | None:
        return self._sessions.get(session_id)

    def put(self, session_id: str, value: S) -> None:
        with self._lock:
            self._sessions[session_id] = value

    def pop(self, session_id: str) -> Any:
        with self._lock:
            return self._sessions.pop(session_id, None)

    def __len__(self) -> int:
        return len(self._sessions)


def limit_of(request: ToolSearchRequest, default: int) -> int:
    """The number of results ``request`` asks for (its own, else ``default``), at least 1."""
    return max(1, request.max_results if request.max_results is not None else default)
