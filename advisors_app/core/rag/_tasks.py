"""Running independent coroutines concurrently while keeping the first error's own type."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

__all__ = ["call_maybe_blocking", "gather_or_cancel"]

T = TypeVar("T")


async def gather_or_cancel(awaitables: Iterable[Awaitable[T]]) -> list[T]:
    """Await all concurrently; on the first failure cancel the rest and raise that error.

    Unlike ``asyncio.TaskGroup`` the error is not wrapped in an ``ExceptionGroup`` (errors
    keep their type). Each task runs in a copy of the caller's ``contextvars`` context.
    """
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def call_maybe_blocking(function: Callable[..., Any], *args: Any) -> Any:
    """Await ``function(*args)`` if it is ``async def``; else run it in a worker thread."""
    if inspect.iscoroutinefunction(function):
        return await function(*args)
    result = await asyncio.to_thread(function, *args)
    if inspect.isawaitable(result):
        return await result
    return result
