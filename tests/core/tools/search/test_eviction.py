"""Eviction strategies for tool-search sessions."""

from __future__ import annotations

import pytest

from advisors_app.core.tools.search import (
    AlwaysEvictStrategy,
    CompositeEvictionStrategy,
    LruEvictionStrategy,
    NeverEvictStrategy,
    ToolIndexEvictionStrategy,
    TtlEvictionStrategy,
)


def test_lru_evicts_the_least_recently_used_beyond_the_limit():
    lru = LruEvictionStrategy(2)
    assert lru.on_access("a") == set()
    assert lru.on_access("b") == set()
    assert lru.on_access("a") == set()  # a is now the most recent
    assert lru.on_access("c") == {"b"}
    lru.on_removed("a")
    assert lru.on_access("d") == set()
    with pytest.raises(ValueError, match="maxSessions must be positive"):
        LruEvictionStrategy(0)


def test_ttl_evicts_other_idle_sessions_on_access():
    now = [0.0]
    ttl = TtlEvictionStrategy(10, clock=lambda: now[0])
    ttl.on_access("a")
    now[0] = 5
    ttl.on_access("b")
    now[0] = 10
    assert ttl.on_access("b") == {"a"}  # idle exactly ttl counts; the current one never
    ttl.on_removed("a")
    now[0] = 100
    assert ttl.on_access("c") == {"b"}
    with pytest.raises(ValueError, match="ttl must be positive"):
        TtlEvictionStrategy(0)


def test_composite_always_and_never():
    now = [0.0]
    composite = CompositeEvictionStrategy(
        LruEvictionStrategy(1), TtlEvictionStrategy(1, clock=lambda: now[0])
    )
    composite.on_access("a")
    now[0] = 2
    assert composite.on_access("b") == {"a"}
    composite.on_removed("a")
    with pytest.raises(ValueError, match="at least one strategy is required"):
        CompositeEvictionStrategy()
    assert AlwaysEvictStrategy().on_access("x") == {"x"}
    assert NeverEvictStrategy().on_access("x") == set()
    for strategy in (composite, AlwaysEvictStrategy(), NeverEvictStrategy()):
        assert isinstance(strategy, ToolIndexEvictionStrategy)
