"""A small MCP server for the tests, built with the SDK's server API (``MCPServer``).

``python server.py stdio [MARKER]`` serves over stdio; ``python server.py http PORT [MARKER]``
serves streamable HTTP on 127.0.0.1:PORT at ``/mcp``, refusing requests whose
``Authorization`` is not ``Bearer <$MCP_TEST_TOKEN>`` when that variable is set. ``MARKER`` is
a file the ``slow`` tool appends ``cancelled`` to when its call is cancelled.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("advisors-test")
MARKER = ""


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """The text in capitals."""
    return text.upper()


@server.tool()
def fail(reason: str) -> str:
    """Always fails with the reason."""
    from mcp.server.mcpserver.exceptions import ToolError

    raise ToolError(f"cannot do it: {reason}")


@server.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        if MARKER:
            with open(MARKER, "a") as marker:
                marker.write("cancelled\n")
        raise
    return "slept"


def extra(text: str) -> str:
    """A tool that appears when grow is called."""
    return f"extra {text}"


@server.tool()
async def grow(ctx: Context) -> str:
    """Adds the tool extra and tells the clients."""
    server.add_tool(extra)
    await ctx.notify_tools_changed()
    return "grown"


def shout_loudly(text: str) -> str:
    return text.upper() + "!"


@server.tool()
async def evolve(ctx: Context) -> str:
    """Changes what shout says about itself, and tells the clients."""
    server.remove_tool("shout")
    server.add_tool(shout_loudly, name="shout", description="The text in capitals, loudly.")
    await ctx.notify_tools_changed()
    return "evolved"


@server.tool()
def page_by_its_full_title_and_lang(title: str) -> str:
    """A long tool name: behind a long prefix it passes the 64 characters model APIs allow."""
    return title


def http_app(token: str) -> Any:
    app = server.streamable_http_app()
    if not token:
        return app

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"authorization", b"").decode() != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "stdio":
        MARKER = sys.argv[2] if len(sys.argv) > 2 else ""
        server.run()
    else:
        import uvicorn

        port = int(sys.argv[2])
        MARKER = sys.argv[3] if len(sys.argv) > 3 else ""
        app = http_app(os.environ.get("MCP_TEST_TOKEN", ""))
        uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
