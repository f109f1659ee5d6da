"""Stopping the server mid-turn stores the running turns, as a client disconnect does.

Daphne cancels every connection before it exits (Ctrl-C, SIGTERM), but its hook fails with a
``KeyError`` when a connection's application has not started yet (daphne 4.2) and then cancels
nothing: the running turns vanish with the process, with no transcript and no call log. Call
:func:`stop_turns_before_daphne_exits` from your ``asgi.py``; it adds a hook of its own that
runs :func:`~advisors_app.turn.service.stop_running_turns` first and makes the server wait for it,
then closes the process's pooled MCP connections (:func:`~advisors_app.mcp.close_mcp_connections`;
other servers close them at interpreter exit).

:func:`stopping` tells a connection cancelled by the server apart: daphne also cancels a
connection that took more than its application close timeout (10 s) to end after its client
left, which must not stop a turn left running under ``DISCONNECT_POLICY = "continue"``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

__all__ = ["stop_turns_before_daphne_exits", "stopping"]

_stopping = False


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
    from advisors_app.turn.service import stop_running_turns

    async def stop() -> None:
        global _stopping
        _stopping = True
        await stop_running_turns()
        # Then the pooled MCP connections: stdio servers exit with the server, not after it.
        await asyncio.to_thread(close_mcp_connections)

    def before_shutdown() -> Any:
        return defer.Deferred.fromFuture(asyncio.ensure_future(stop()))

    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)
