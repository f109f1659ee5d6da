"""When a tool-search session's index is dropped (Spring AI ``ToolIndexEvictionStrategy``).

``on_access(session_id)`` is called at the start of each turn and returns the sessions to evict
now; ``on_removed(session_id)`` tells the strategy a session is gone. Strategies are thread-safe:
one advisor serves every request of a process. Times are in seconds (``time.monotonic``).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

__all__ = [
    "AlwaysEvictStrategy",
    "CompositeEvictionStrategy",
    "LruEvictionStrategy",
    "NeverEvictStrategy",
    "ToolIndexEvictionStrategy",
    "TtlEvictionStrategy",
]


@runtime_checkable
class ToolIndexEvictionStrategy(Protocol):
    """Decides which session indexes to drop."""

    def on_access(self, session_id: str) -> set[str]: ...

    def on_removed(self, session_id: str) -> None: ...


class LruEvictionStrategy:
    """Keeps the ``max_sessions`` most recently used sessions (default 1000).

    Raises ``ValueError("maxSessions must be positive")`` for ``max_sessions < 1``.
    """

    def __init__(self, max_sessions: int = 1000) -> None:
        if max_sessions < 1:
            raise ValueError("maxSessions must be positive")
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def on_access(self, session_id: str) -> set[str]:
        with self._lock:
            self._sessions[session_id] = None
            self._sessions.move_to_end(session_id)
            evicted = set()
            while len(self._sessions) > self.max_sessions:
                eldest, _ = self._sessions.popitem(last=False)
                evicted.add(eldest)
            return evicted

    def on_removed(self, session_id: str) -> None:
        with self._lock:
            self._sessions.pop(session_id, None)


class TtlEvictionStrategy:
    """Evicts every other session idle for ``ttl`` seconds or more, checked on each access.

    Raises ``ValueError("ttl must be positive")`` for ``ttl <= 0``. ``clock`` returns seconds.
    """

    def __init__(self, ttl: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl = ttl
        self._clock = clock
        self._last_access: dict[str, float] = {}
        self._lock = threading.Lock()

    def on_access(self, session_id: str) -> set[str]:
        now = self._clock()
        with self._lock:
            self._last_access[session_id] = now
            return {
                other
                for other, seen in self._last_access.items()
                if other != session_id and now - seen >= self.ttl
            }

    def on_removed(self, session_id: str) -> None:
        with self._lock:
            self._last_access.pop(session_id, None)


class CompositeEvictionStrategy:
    """The union of several strategies' evictions; removals reach them all.

    Raises ``ValueError("at least one strategy is required")`` when given none.
    """

    def __init__(self, *strategies: ToolIndexEvictionStrategy) -> None:
        if not strategies:
            raise ValueError("at least one strategy is required")
        self.strategies = strategies

    def on_access(self, session_id: str) -> set[str]:
        evicted: set[str] = set()
        for strategy in self.strategies:
            evicted |= strategy.on_access(session_id)
        return evicted

    def on_removed(self, session_id: str) -> None:
        for strategy in self.strategies:
            strategy.on_removed(session_id)


class AlwaysEvictStrategy:
    """Evicts the current session on every access, so its tools are re-indexed each turn."""

    def on_access(self, session_id: str) -> set[str]:
        return {session_id}

    def on_removed(self, session_id: str) -> None:
        return None


class NeverEvictStrategy:
    """Never evicts: indexes live as long as the process (for a small fixed set of sessions)."""

    def on_access(self, session_id: str) -> set[str]:
        return set()

    def on_removed(self, session_id: str) -> None:
        return None
