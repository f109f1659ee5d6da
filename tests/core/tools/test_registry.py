"""ToolRegistry: named tools, duplicates refused, unknown names in Spring's words."""

from __future__ import annotations

import pytest

from advisors_app.core import AdvisorStateError
from advisors_app.core.tools import ToolRegistry, tool


@tool
def alpha() -> str:
    """A."""
    return "a"


@tool
def beta() -> str:
    """B."""
    return "b"


def test_register_resolve_and_iterate_in_order():
    registry = ToolRegistry([alpha])
    registry.register(beta)
    assert registry.names == ("alpha", "beta")
    assert registry.resolve(["beta", "alpha"]) == (beta, alpha)
    assert "alpha" in registry and len(registry) == 2
    assert list(registry) == [alpha, beta]
    registry.unregister("alpha")
    assert registry.get("alpha") is None


def test_duplicates_and_unknown_names():
    registry = ToolRegistry([alpha])
    registry.register(alpha)  # the same object again is harmless

    @tool(name="alpha")
    def other() -> str:
        """Other."""
        return ""

    with pytest.raises(ValueError, match="tool 'alpha' is already registered"):
        registry.register(other)
    registry.register(other, replace=True)
    assert registry.get("alpha") is other
    with pytest.raises(AdvisorStateError, match="No ToolCallback found for tool name: gamma"):
        registry.resolve(["gamma"])
    with pytest.raises(ValueError, match="expected a ToolCallback"):
        registry.register(lambda: None)
