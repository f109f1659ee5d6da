"""Blocking database work of a turn: off the event loop, on the turn's own thread, without
holding a pooled connection between pieces of work.

Django runs each HTTP request's synchronous code on a thread of its own (the request's
``ThreadSensitiveContext``) and gives the connection back when the request ends. A streamed
turn needs two things more:

* **A thread per websocket turn.** Channels gives consumers no such context, so every
  thread-sensitive ``sync_to_async`` of every socket of a process queues on one shared
  thread: one slow query delays the start of every other socket's turn (500 chats on one
  process: first delta p99 2.8 s). :func:`own_thread` gives a turn its thread, as a request
  has, and closes the thread's connections when the turn ends.
* **No connection held while the answer streams.** A streamed turn (SSE, websocket) lasts as
  long as its answer — 30 s and more — while its database work takes milliseconds at its start
  and end. A pooled connection held for the whole stream would cap concurrent streams at the
  pool's size (the next one waits, then fails). :func:`db_sync_to_async` hands a pooled
  connection back after each piece of work; handing it back costs nothing. An unpooled
  connection is kept (reconnecting would cost a connection per piece of work) until the
  request or turn ends, as Django does.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import ParamSpec, TypeVar

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connections

__all__ = ["db_sync_to_async", "own_thread"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _release_pooled() -> None:
    """Give this thread's pooled connections back, except one inside ``atomic`` (its
    transaction is still open: a test's, or a caller's that this work runs in)."""
    for connection in connections.all(initialized_only=True):
        if connection.in_atomic_block or connection.connection is None:
            continue
        if connection.settings_dict.get("OPTIONS", {}).get("pool"):
            connection.close()


def db_sync_to_async(function: Callable[_P, _R]) -> Callable[_P, Awaitable[_R]]:
    """``sync_to_async(function)`` (thread-sensitive) that then gives the thread's pooled
    connections back (see the module docstring)."""

    @functools.wraps(function)
    def released(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        finally:
            _release_pooled()

    return sync_to_async(released)


@asynccontextmanager
async def own_thread() -> AsyncIterator[None]:
    """Run the block's thread-sensitive work on a thread of its own (as a Django request
    does), and close that thread's connections when the block ends."""
    async with ThreadSensitiveContext():
        try:
            yield
        finally:
            # The thread ends with the block: what it opened is closed (pooled ones go back).
            await sync_to_async(connections.close_all)()
