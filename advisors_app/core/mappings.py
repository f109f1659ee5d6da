"""Read-only mappings used for metadata and advisor context.

Contexts and metadata travel between advisors and across chunks; making them read-only is what
stops one advisor (or one chunk) from changing what another already holds (Spring AI defects
5.1.8 "context map aliasing" and seed §6.16.2 #2).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["EMPTY", "ReadOnlyMap", "freeze", "merged"]


class ReadOnlyMap(Mapping[str, Any]):
    """An immutable, picklable ``str``-keyed mapping; ``None`` values are allowed.

    Raises ``ValueError("context keys cannot be null")`` for a ``None`` key, as Spring AI's
    ``ChatClientRequest`` does.
    """

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        items = dict(data) if data else {}
        if None in items:
            raise ValueError("context keys cannot be null")
        self._data = items

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def get(self, key: str, default: Any = None) -> Any:
        return self._data.get(key, default)

    def __hash__(self) -> int:
        # Hashable like a frozenset of its items (TypeError for unhashable values), so it can
        # be a dataclass default and part of hashable frozen values.
        return hash(frozenset(self._data.items()))

    def merged(self, changes: Mapping[str, Any] | None) -> ReadOnlyMap:
        """Return a copy with ``changes`` merged over this mapping (later keys win)."""
        if not changes:
            return self
        data = dict(self._data)
        data.update(changes)
        return ReadOnlyMap(data)

    def to_dict(self) -> dict[str, Any]:
        return dict(self._data)

    def __repr__(self) -> str:
        return f"{{{', '.join(f'{k!r}: {v!r}' for k, v in self._data.items())}}}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (ReadOnlyMap, (self._data,))


EMPTY = ReadOnlyMap()


def merged(base: Mapping[str, Any] | None, changes: Mapping[str, Any] | None) -> ReadOnlyMap:
    """``base`` with ``changes`` merged over it (later keys win), as a :class:`ReadOnlyMap`."""
    return freeze(base).merged(changes)


def freeze(data: Mapping[str, Any] | None) -> ReadOnlyMap:
    """Return ``data`` as a :class:`ReadOnlyMap` without copying one that already is."""
    if isinstance(data, ReadOnlyMap):
        return data
    if not data:
        return EMPTY
    return ReadOnlyMap(data)
