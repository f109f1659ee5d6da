"""Closing async iterators deterministically.

A consumer that stops iterating must cancel the work upstream (the model request). Python only
closes an async generator when someone calls ``aclose()``; every layer that iterates another
stream does so inside :class:`closing_stream`, so an early close propagates to the model while
a normal end never raises ``GeneratorExit``/``CancelledError`` upstream (bug case B28).
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["closing_stream"]

T = TypeVar("T")


class closing_stream(Generic[T]):
    """``async with closing_stream(source) as it:`` iterates ``source`` and closes it on exit."""

    __slots__ = ("_iterator",)

    def __init__(self, source: AsyncIterable[T]) -> None:
        self._iterator: AsyncIterator[T] = aiter(source)

    async def __aenter__(self) -> AsyncIterator[T]:
        return self._iterator

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        aclose = getattr(self._iterator, "aclose", None)
        if aclose is not None:
            await aclose()
