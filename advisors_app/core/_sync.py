"""Running the async engine from synchronous code.

Two ways, chosen per call:

- In a thread that asgiref started for a running event loop — a sync Django view under ASGI, or
  any function run with ``sync_to_async`` — the coroutine runs with asgiref's
  ``async_to_sync``: on that outer loop, while this thread serves the thread-sensitive work the
  coroutine hands back (the Django stores' ORM calls). A private loop here would block the very
  thread those calls wait for, and the request would hang.
- Anywhere else (scripts, management commands, WSGI views, worker threads): one event loop per
  thread, reused. Creating a loop per call costs ~150 µs here, ten times the whole chain
  (``async_to_sync`` costs ~700 µs a call); core objects keep no loop-bound state, so each call
  may run on any loop.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")
_local = threading.local()


def _outer_loop() -> asyncio.AbstractEventLoop | None:
    """The running loop asgiref's ``sync_to_async`` called this thread from, if any."""
    try:
        from asgiref.sync import SyncToAsync
    except ImportError:  # the core runs without asgiref; then no such loop exists
        return None
    local = SyncToAsync.threadlocal
    if getattr(local, "main_event_loop_pid", None) != os.getpid():
        return None
    loop: asyncio.AbstractEventLoop | None = getattr(local, "main_event_loop", None)
    return loop if loop is not None and loop.is_running() else None


async def _await(coroutine: Coroutine[Any, Any, T]) -> T:
    return await coroutine


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion and return its result (see the module docstring).

    Exceptions propagate with their original type. Raises ``RuntimeError`` when called from a
    running event loop (use the ``a``-prefixed async twin there instead).
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coroutine.close()
        raise RuntimeError(
            "a synchronous method was called from a running event loop; "
            "await its async twin instead (the same name with an `a` prefix, for example "
            "`await spec.acall()`, `await store.asimilarity_search(...)`)"
        )
    if _outer_loop() is not None:
        from asgiref.sync import async_to_sync

        return async_to_sync(_await)(coroutine)
    loop: asyncio.AbstractEventLoop | None = getattr(_local, "loop", None)
    if loop is None or loop.is_closed():
        loop = asyncio.new_event_loop()
        _local.loop = loop
    return loop.run_until_complete(coroutine)
