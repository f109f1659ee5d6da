"""One registry of named things: tools here, advisor types and evaluators in the Django layer.

A chain, a run or an admin form stores a **key** and looks it up in a :class:`Registry`, never an
import path, so configuration cannot import code. The tool registry
(:class:`advisors_app.core.tools.ToolRegistry`, Spring AI's ``StaticToolCallbackResolver``), the
advisor-type registry (:class:`advisors_app.definition.registry.AdvisorTypeRegistry`) and the
evaluator registry (:class:`advisors_app.evaluation.evaluators.EvaluatorRegistry`) are thin
subclasses; it lives in the core because the tool registry does, and everything above can
import the core.

Tests register an item for their own duration with :meth:`Registry.registered`::

    with advisor_types.registered(AdvisorType(key="shout", ...)):
        ...  # "shout" is registered here, and whatever it replaced is back afterwards
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Generic, TypeVar

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Items of one kind by key; thread-safe; iteration in registration order.

    A subclass names its kind for messages (:attr:`kind`, :attr:`kinds`), says where an item's
    key is (:meth:`key_of`: its ``key`` attribute by default) and may refuse an item
    (:meth:`validate`). ``register`` raises ``ValueError`` when another item already has the
    key (``replace=True`` swaps it; the same object again is harmless); ``registry[key]``
    raises ``KeyError`` naming the key and the registered keys; ``get`` returns ``None``.
    Registering and unregistering hold a lock; reads take a snapshot and need none.
    """

    #: What one item is called in messages ("tool", "advisor type", "evaluator").
    kind = "item"
    #: What the registered items are called in "Registered <kinds>: ..." listings.
    kinds = "items"

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._items: dict[str, T] = {}
        self._lock = threading.Lock()
        for item in items:
            self.register(item)

    def key_of(self, item: T) -> str:
        """The key ``item`` is stored under: its ``key`` attribute (a subclass may say another)."""
        key = getattr(item, "key", None)
        if not isinstance(key, str):
            raise ValueError(f"a {self.kind} needs a str key, got {item!r}")
        return key

    def validate(self, item: T) -> None:
        """Raise ``ValueError`` if ``item`` may not be registered (nothing is refused here)."""

    def register(self, item: T, *, replace: bool = False) -> T:
        """Add ``item`` under its key and return it (so ``@registry.register`` decorates)."""
        self.validate(item)
        key = self.key_of(item)
        with self._lock:
            existing = self._items.get(key)
            if existing is not None and existing is not item and not replace:
                raise ValueError(
                    f"{self.kind} {key!r} is already registered; pass replace=True to swap it"
                )
            self._items[key] = item
        return item

    def unregister(self, key: str) -> None:
        """Remove the item under ``key``; a key not registered is ignored."""
        with self._lock:
            self._items.pop(key, None)

    @contextmanager
    def registered(self, *items: T, replace: bool = False) -> Iterator[None]:
        """Register ``items`` for the ``with`` block (or a fixture's ``yield``), then unregister
        them and put back any item they replaced (``replace=True`` lets them replace one)."""
        replaced: list[tuple[str, T | None]] = []
        try:
            for item in items:
                key = self.key_of(item)
                previous = self._items.get(key)
                self.register(item, replace=replace)
                replaced.append((key, previous))
            yield
        finally:
            with self._lock:
                for key, previous in reversed(replaced):
                    if previous is None:
                        self._items.pop(key, None)
                    else:
                        self._items[key] = previous

    def get(self, key: str) -> T | None:
        return self._items.get(key)

    def __getitem__(self, key: str) -> T:
        found = self._items.get(key)
        if found is None:
            raise KeyError(self.unknown_message(key))
        return found

    def unknown_message(self, key: object) -> str:
        """``Unknown <kind> 'key'. Registered <kinds>: a, b.`` (``none`` when empty)."""
        known = ", ".join(self._items) or "none"
        return f"Unknown {self.kind} {key!r}. Registered {self.kinds}: {known}."

    @property
    def keys(self) -> tuple[str, ...]:
        """The registered keys, in registration order."""
        return tuple(self._items)

    def choices(self) -> list[tuple[str, str]]:
        """``(key, "<label> (<key>)")`` pairs for a form's select (label: the item's ``label``
        attribute, else its key)."""
        return [
            (key, f"{getattr(item, 'label', '') or key} ({key})")
            for key, item in tuple(self._items.items())
        ]

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(tuple(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)
