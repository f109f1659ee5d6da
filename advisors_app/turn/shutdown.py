"""Stopping the server mid-turn stores the running turns, as a client disconnect does, and ends
their streams with an ``error`` event (code ``server_shutdown``).

The turn notes the tasks that run a turn (:func:`turn_task_started`, by ``call_turn`` and by the
task iterating a ``TurnStream``) and those that finish one after a cancel (:func:`finishing`:
the call log and the partial transcript are written by a shielded task);
:func:`stop_running_turns` cancels the first and waits for both.

Daphne cancels every connection before it exits (Ctrl-C, SIGTERM), but its hook fails with a
``KeyError`` when a connection's application has not started yet (daphne 4.2) and then cancels
nothing: the running turns vanish with the process, with no transcript and no call log. Call
:func:`stop_turns_before_daphne_exits` from your ``asgi.py``; it adds a hook of its own that
runs :func:`stop_running_turns` first and makes the server wait for it, then closes the
process's pooled MCP connections (:func:`~advisors_app.mcp.close_mcp_connections`; other servers
close them at interpreter exit).

While it stops, the SSE streams and websockets of the turns it stopped send the text they held
back and an ``error`` event with code ``server_shutdown``
(:func:`~advisors_app.turn.delivery.shutdown_frames`); the websocket is then closed with code
4503. A turn stopped before any text keeps the user's message, marked interrupted
(the user did not stop it; :mod:`advisors_app.turn.finish`).

:func:`stopping` tells a connection cancelled by the server apart: daphne also cancels a
connection that took more than its application close timeout (10 s) to end after its client
left, which must not stop a turn left running under ``DISCONNECT_POLICY = "continue"``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, TypeVar

__all__ = [
    "delivering",
    "finishing",
    "stop_running_turns",
    "stop_turns_before_daphne_exits",
    "stopping",
    "turn_task_ended",
    "turn_task_started",
]

_T = TypeVar("_T")
_stopping = False
#: Tasks running a turn now: call_turn's, or the one iterating a TurnStream.
_running: set[asyncio.Task[Any]] = set()
#: Tasks that finish a cancelled turn (log row, transcript); the loop keeps only weak refs.
_finishing: set[asyncio.Task[Any]] = set()
#: Tasks sending a turn's events to a client (an SSE response): waited for on shutdown, so the
#: ``error`` event that ends a stopped stream reaches its client before the server exits.
_delivering: set[asyncio.Task[Any]] = set()


def turn_task_started() -> None:
    """Note the current task as running a turn (until it ends, or :func:`turn_task_ended`)."""
    task = asyncio.current_task()
    if task is not None and task not in _running:
        _running.add(task)
        task.add_done_callback(_running.discard)


def turn_task_ended() -> None:
    """The current task no longer runs a turn."""
    task = asyncio.current_task()
    if task is not None:
        _running.discard(task)


async def finishing(coroutine: Awaitable[_T]) -> _T:
    """Await ``coroutine``, which runs to its end even if the caller is cancelled meanwhile.

    The caller still receives its ``CancelledError``; the log row and transcript are written
    regardless (the task is kept referenced until it is done, and waited for by
    :func:`stop_running_turns`).
    """
    task = asyncio.ensure_future(coroutine)
    _finishing.add(task)
    task.add_done_callback(_finishing.discard)
    return await asyncio.shield(task)


def delivering() -> None:
    """Note the current task as sending a turn's events to its client, until it ends (an SSE
    response: Django's task that sends the response body)."""
    task = asyncio.current_task()
    if task is not None and task not in _delivering:
        _delivering.add(task)
        task.add_done_callback(_delivering.discard)


async def stop_running_turns(timeout: float = 10.0) -> None:
    """Stop every turn running in this process, as a client disconnect would: the partial
    replies are stored flagged as interrupted and the call logs say cancelled; then wait for
    the responses still sending their last events (streams end with an ``error`` event, code
    ``server_shutdown``, when :func:`stopping`). Waits at most ``timeout`` seconds for each.
    For a server shutting down."""
    running = [task for task in _running if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=timeout)
    if _finishing:
        await asyncio.wait(list(_finishing), timeout=timeout)
    sending = [task for task in _delivering if not task.done()]
    if sending:
        await asyncio.wait(sending, timeout=timeout)


def stopping() -> bool:
    """Whether this process's server began shutting down (the hook below ran)."""
    return _stopping


def stop_turns_before_daphne_exits() -> None:
    """Under daphne (its CLI or its ``runserver``), end running turns before the server exits.

    Does nothing under another server: the Twisted reactor is only looked at when daphne has
    installed it already (importing it otherwise would install one).
    """
    if "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import defer, reactor

    from advisors_app.mcp import close_mcp_connections

    async def stop() -> None:
        global _stopping
        _stopping = True
        await stop_running_turns()
        # Then the pooled MCP connections: stdio servers exit with the server, not after it.
        await asyncio.to_thread(close_mcp_connections)

    def before_shutdown() -> Any:
        return defer.Deferred.fromFuture(asyncio.ensure_future(stop()))

    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)
