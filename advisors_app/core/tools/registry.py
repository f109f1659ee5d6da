"""A registry of named tools (Spring AI ``ToolCallbackResolver`` / ``StaticToolCallbackResolver``).

Chains enable tools by name (``ToolCallingChatOptions.tool_names``); the ``ToolCallingManager``
resolves the names through a :class:`ToolRegistry`. The Django layer fills one registry at
startup and stores only names in the database.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator

from ..exceptions import AdvisorStateError
from .callback import ToolCallback

__all__ = ["ToolRegistry"]


class ToolRegistry:
    """Named :class:`ToolCallback` objects; thread-safe, iteration in registration order.

    ``register`` raises ``ValueError`` when another tool already has the name (pass
    ``replace=True`` to swap it); ``resolve(names)`` raises
    ``AdvisorStateError("No ToolCallback found for tool name: <name>")`` for an unknown name
    (Spring AI's message).
    """

    def __init__(self, tools: Iterable[ToolCallback] = ()) -> None:
        self._tools: dict[str, ToolCallback] = {}
        self._lock = threading.Lock()
        for callback in tools:
            self.register(callback)

    def register(self, callback: ToolCallback, *, replace: bool = False) -> ToolCallback:
        """Add ``callback`` under its name and return it (usable as a decorator on ``@tool``)."""
        if not isinstance(callback, ToolCallback):
            raise ValueError(f"expected a ToolCallback (use @tool), got {callback!r}")
        name = callback.name
        with self._lock:
            existing = self._tools.get(name)
            if existing is not None and existing is not callback and not replace:
                raise ValueError(
                    f"a tool named {name!r} is already registered; pass replace=True to swap it"
                )
            self._tools[name] = callback
        return callback

    def unregister(self, name: str) -> None:
        with self._lock:
            self._tools.pop(name, None)

    def get(self, name: str) -> ToolCallback | None:
        return self._tools.get(name)

    def resolve(self, names: Iterable[str]) -> tuple[ToolCallback, ...]:
        """The callbacks for ``names``, in the order given."""
        resolved = []
        for name in names:
            callback = self._tools.get(name)
            if callback is None:
                raise AdvisorStateError(f"No ToolCallback found for tool name: {name}")
            resolved.append(callback)
        return tuple(resolved)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[ToolCallback]:
        return iter(tuple(self._tools.values()))

    def __len__(self) -> int:
        return len(self._tools)
