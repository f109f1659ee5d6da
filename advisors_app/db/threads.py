"""Blocking database work of a turn: off the event loop, on the turn's own thread, without
holding a pooled connection between pieces of work.

Django runs each HTTP request's synchronous code on a thread of its own (the request's
``ThreadSensitiveContext``) and gives the connection back when the request ends. A streamed
turn needs two things more:

* **A thread per websocket.** Channels gives consumers no such context, so every
  thread-sensitive ``sync_to_async`` of every socket of a process queues on one shared
  thread: one slow query delays the start of every other socket's turn (500 chats on one
  process: first delta p99 2.8 s). :func:`own_thread` runs a turn on a thread of its own, as a
  request has, and closes the thread's connections when the turn ends. A socket keeps its
  thread (:class:`TurnThread`) from turn to turn: a new thread's first query costs about
  0.6 ms more (Django builds the thread's connection objects anew), a quarter of a later
  turn's time to first token.
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
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from typing import ParamSpec, TypeVar

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.db import connections

__all__ = ["TurnThread", "db_sync_to_async", "own_thread"]

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


class TurnThread(ThreadPoolExecutor):
    """The one thread a websocket's turns run their database work on, one turn after the
    other (:func:`own_thread`); its owner shuts it down once the socket and its last turn
    have ended."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="advisors-turn")


@asynccontextmanager
async def own_thread(thread: TurnThread | None = None) -> AsyncIterator[None]:
    """Run the block's thread-sensitive work on a thread of its own (as a Django request
    does) — ``thread``, or a new one — and close that thread's connections when the block
    ends (pooled ones go back to the pool; the thread keeps its connection objects)."""
    async with ThreadSensitiveContext(executor=thread):
        try:
            yield
        finally:
            # What the block opened is closed: an idle socket holds no connection.
            await sync_to_async(connections.close_all)()
