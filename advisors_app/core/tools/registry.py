"""A registry of named tools (Spring AI ``ToolCallbackResolver`` / ``StaticToolCallbackResolver``).

Chains enable tools by name (``ToolCallingChatOptions.tool_names``); the ``ToolCallingManager``
resolves the names through a :class:`ToolRegistry`. The Django layer fills one registry at
startup and stores only names in the database.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..exceptions import AdvisorStateError
from ..registry import Registry
from .callback import ToolCallback

__all__ = ["ToolRegistry"]


class ToolRegistry(Registry[ToolCallback]):
    """Named :class:`ToolCallback` objects (a :class:`~advisors_app.core.registry.Registry`
    keyed by ``callback.name``); thread-safe, iteration in registration order.

    ``register`` raises ``ValueError`` for anything but a ``ToolCallback`` and when another tool
    already has the name (pass ``replace=True`` to swap it); ``resolve(names)`` raises
    ``AdvisorStateError("No ToolCallback found for tool name: <name>")`` for an unknown name
    (Spring AI's message).
    """

    kind = "tool"
    kinds = "tools"

    def key_of(self, item: ToolCallback) -> str:
        return item.name

    def validate(self, item: ToolCallback) -> None:
        if not isinstance(item, ToolCallback):
            raise ValueError(f"expected a ToolCallback (use @tool), got {item!r}")

    def resolve(self, names: Iterable[str]) -> tuple[ToolCallback, ...]:
        """The callbacks for ``names``, in the order given."""
        resolved = []
        for name in names:
            callback = self.get(name)
            if callback is None:
                raise AdvisorStateError(f"No ToolCallback found for tool name: {name}")
            resolved.append(callback)
        return tuple(resolved)

    @property
    def names(self) -> tuple[str, ...]:
        """The registered tool names, in registration order (:attr:`keys`)."""
        return self.keys
