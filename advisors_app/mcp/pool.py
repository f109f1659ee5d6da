"""Pooled MCP client connections, one per server configuration and process.

The SDK's sessions are bound to the event loop (and the task) that opened them, while turns run
on whichever loop serves them (the ASGI loop, a sync facade's per-thread loop). So the pool runs
**one background event loop thread** that owns every connection: a connection is a task there
that opens ``mcp.Client`` (streamable HTTP or stdio), keeps it open and closes it in the same
task. Callers on any loop submit coroutines to it and await the result with
``asyncio.wrap_future``, so cancelling the caller (a cancelled turn) cancels the call on the
pool's loop too — the SDK then abandons the request.

Discovered tool lists are cached per configuration for ``ADVISORS["MCP_DISCOVERY_TTL_SECONDS"]``
and dropped when the server says its tools changed: a ``notifications/tools/list_changed``
(2025 protocol) or a ``subscriptions/listen`` event (2026-07-28). A connection that breaks is
dropped; the next call opens a new one. :func:`close_mcp_connections` (called at exit and by the
server shutdown hook) closes them all.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from advisors_app.conf import app_settings

from .config import ServerConfig

__all__ = [
    "McpCallResult",
    "McpClientPool",
    "McpServerError",
    "McpTool",
    "close_mcp_connections",
    "mcp_pool",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Seconds to wait for every connection to close at shutdown.
CLOSE_TIMEOUT = 5.0
#: Seconds before a dropped ``subscriptions/listen`` stream is opened again.
LISTEN_RETRY_SECONDS = 1.0
#: A listen stream this old is renewed before a call or a listing (see ``_Connection``).
LISTEN_RENEW_SECONDS = 1.0
#: Longest a listen stream is kept while the connection is idle.
LISTEN_MAX_AGE_SECONDS = 60.0
#: Seconds a failed discovery is remembered: saving a chain whose server is down does not wait
#: for the connect timeout again and again.
FAILURE_TTL = 15.0


class McpServerError(RuntimeError):
    """Raised when an MCP server cannot be reached, answers with a protocol error or times out."""

    #: An expected outcome: the tool loop logs it as one line, without a traceback.
    expected_tool_error = True


@dataclass(frozen=True)
class McpTool:
    """One tool a server lists: ``name``, ``description`` and ``input_schema`` (a JSON Schema)."""

    name: str
    description: str
    input_schema: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }


@dataclass(frozen=True)
class McpCallResult:
    """A ``tools/call`` result as text, and whether the server flagged it as an error."""

    text: str
    is_error: bool


def _result_text(result: Any) -> str:
    parts = []
    for item in result.content or ():
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {getattr(item, 'mime_type', '')}]")
        else:
            parts.append(json.dumps(item.model_dump(mode="json", exclude_none=True)))
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, sort_keys=True))
    return "\n".join(parts)


class _Connection:
    """One open ``mcp.Client``, owned by a task of the pool's loop."""

    def __init__(self, pool: McpClientPool, config: ServerConfig) -> None:
        self.pool = pool
        self.config = config
        self.client: Any = None
        self.error: BaseException | None = None
        self.ready = asyncio.Event()
        self.stop = asyncio.Event()
        #: Whether the server takes ``subscriptions/listen``; the current stream's task.
        self.listens = False
        self.subscription: asyncio.Task[None] | None = None
        self.subscribed_at = 0.0
        self.renewing = asyncio.Lock()
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        config = self.config
        if config.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            return stdio_client(
                StdioServerParameters(
                    command=config.command,
                    args=list(config.args),
                    env=dict(config.env) or None,
                    cwd=config.cwd,
                )
            )
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(
            httpx2.AsyncClient(
                headers=config.resolved_headers(),
                # Reads wait as long as a call may; the call timeout is enforced per call.
                timeout=httpx2.Timeout(
                    config.connect_timeout, read=max(300.0, config.call_timeout)
                ),
            )
        )
        return streamable_http_client(config.url, http_client=http)

    async def _run(self) -> None:
        from mcp import Client

        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(
                    await self._transport(stack),
                    cache=None,
                    message_handler=self._on_message,
                    # Requests without their own timeout (the handshake, tools/list).
                    read_timeout_seconds=self.config.connect_timeout,
                )
                await stack.enter_async_context(client)
                self.client = client
                self.ready.set()
                listener = asyncio.get_running_loop().create_task(self._listen(client))
                try:
                    await self.stop.wait()
                finally:
                    for task in (listener, self.subscription):
                        if task is not None:
                            task.cancel()
                            with contextlib.suppress(BaseException):
                                await task
        except BaseException as exc:  # a connection ends, whatever ended it
            self.error = exc
            if not isinstance(exc, asyncio.CancelledError | GeneratorExit):
                logger.warning("MCP server %r: connection ended: %s", self.config.slug, exc)
        finally:
            self.client = None
            self.ready.set()
            self.pool._forget(self)

    # -- list changes (2026-07-28 ``subscriptions/listen``) -------------------------------------
    #
    # A listen stream is one long request to one server process. Over streamable HTTP a
    # restarted server is a new process behind the same URL: calls reach it, but the stream
    # stays with the old one — which waits on it to exit gracefully — and the new process's
    # changes would be missed for the whole TTL. So a stream is not kept for long: it is
    # renewed before a call or listing once it is LISTEN_RENEW_SECONDS old (the new one opens
    # and is acknowledged before the old one closes: no change falls in between) and at least
    # every LISTEN_MAX_AGE_SECONDS while the connection is idle.

    async def _listen(self, client: Any) -> None:
        """Keep a listen stream open while the connection is (2025 servers send
        ``notifications/tools/list_changed`` to :meth:`_on_message` instead)."""
        capabilities = client.server_capabilities.tools
        if capabilities is None or not capabilities.list_changed:
            return
        self.listens = True
        # A stdio server cannot be restarted behind the connection's back: no renewals.
        max_age = LISTEN_MAX_AGE_SECONDS if self.config.transport == "http" else None
        async with self.renewing:
            await self._subscribe(client)
        while self.listens:
            current = self.subscription
            if current is None:
                await asyncio.sleep(LISTEN_RETRY_SECONDS)
                async with self.renewing:
                    opened = await self._subscribe(client)
                if opened:
                    # Events are not replayed: what changed while no stream was open is unknown.
                    self.pool.invalidate(self.config)
                continue
            await asyncio.wait({current}, timeout=max_age)
            if current is not self.subscription:
                continue  # renewed meanwhile
            if current.done():
                # The stream ended: the server closed it or went away, most likely to restart.
                # What changed meanwhile is unknown, and a request sent before the new process
                # listens would break the connection: the next use opens a new one (listening
                # anew).
                self.subscription = None
                self.pool.invalidate(self.config)
                self.pool._retire(self)
                return
            else:
                await self.renew(force=True)

    async def renew(self, force: bool = False) -> None:
        """Open a new listen stream and close the old one, when the old one is
        ``LISTEN_RENEW_SECONDS`` old (or ``force``); a failure keeps the old one."""
        if not self.listens or self.client is None or self.config.transport != "http":
            return
        async with self.renewing:
            if not force and time.monotonic() - self.subscribed_at < LISTEN_RENEW_SECONDS:
                return
            await self._subscribe(self.client)

    async def _subscribe(self, client: Any) -> bool:
        """Open a listen stream and wait for its acknowledgment; then it replaces the current
        one (closed: the server it went to may exit)."""
        acked = asyncio.Event()
        loop = asyncio.get_running_loop()
        task = loop.create_task(self._subscription(client, acked))
        waiter = loop.create_task(acked.wait())
        try:
            await asyncio.wait(
                {task, waiter}, timeout=self.config.connect_timeout, return_when="FIRST_COMPLETED"
            )
        finally:
            waiter.cancel()
        if not acked.is_set():
            task.cancel()
            return False
        old, self.subscription = self.subscription, task
        self.subscribed_at = time.monotonic()
        if old is not None:
            old.cancel()
        return True

    async def _subscription(self, client: Any, acked: asyncio.Event) -> None:
        from mcp.client.subscriptions import ListenNotSupportedError, SubscriptionLost

        try:
            async with client.listen(tools_list_changed=True) as subscription:
                acked.set()
                async for _event in subscription:
                    self.pool.invalidate(self.config)
        except ListenNotSupportedError:
            self.listens = False  # a 2025 connection: notifications reach _on_message
        except SubscriptionLost:
            pass
        except Exception as exc:
            logger.debug("MCP server %r: listen stream failed (%s)", self.config.slug, exc)

    async def _on_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        if method == "notifications/tools/list_changed":
            self.pool.invalidate(self.config)

    async def session(self) -> Any:
        """The open client, its listen stream renewed first when it is not fresh (so a
        restarted server's changes are heard)."""
        await self.ready.wait()
        if self.client is None:
            raise McpServerError(
                f"MCP server {self.config.slug!r} is unreachable: "
                f"{_describe(self.error) if self.error else 'connection closed'}"
            )
        client = self.client
        await self.renew()
        return client


def _describe(error: BaseException) -> str:
    # Exception groups from anyio hide the cause one level down.
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, TimeoutError):
        return "timed out connecting"
    return str(error) or type(error).__name__


def _connection_closed(error: BaseException | None) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp.types import CONNECTION_CLOSED

    return isinstance(error, MCPError) and error.error.code == CONNECTION_CLOSED


def _fail_after(seconds: float) -> Any:
    import anyio

    return anyio.fail_after(seconds)


class McpClientPool:
    """Connections to MCP servers and their discovered tools, shared by a process's turns."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._connections: dict[ServerConfig, _Connection] = {}
        self._tools: dict[ServerConfig, tuple[float, tuple[McpTool, ...]]] = {}
        self._failures: dict[ServerConfig, tuple[float, str]] = {}
        #: Bumped per configuration by a list-changed notice (tests wait on it).
        self.changes: dict[str, int] = {}

    # -- the pool's loop -----------------------------------------------------------------------

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="advisors-mcp-pool", daemon=True
                )
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _submit(self, factory: Callable[[], Awaitable[T]]) -> concurrent.futures.Future[T]:
        async def run() -> T:
            return await factory()

        return asyncio.run_coroutine_threadsafe(run(), self._ensure_loop())

    async def _run(self, factory: Callable[[], Awaitable[T]]) -> T:
        # Cancelling the awaiting task cancels the wrapped future, and with it the task on the
        # pool's loop (the SDK call is abandoned there).
        return await asyncio.wrap_future(self._submit(factory))

    def _retire(self, connection: _Connection) -> None:
        """Close ``connection``; the next use of its configuration opens a new one."""
        self._forget(connection)
        connection.stop.set()

    def _forget(self, connection: _Connection) -> None:
        if self._connections.get(connection.config) is connection:
            del self._connections[connection.config]

    async def _session(self, config: ServerConfig) -> Any:
        connection = self._connections.get(config)
        if connection is None or connection.stop.is_set():
            connection = self._connections[config] = _Connection(self, config)
        return await connection.session()

    def _drop(self, config: ServerConfig) -> None:
        connection = self._connections.pop(config, None)
        if connection is not None:
            connection.stop.set()

    # -- discovery -----------------------------------------------------------------------------

    def invalidate(self, config: ServerConfig) -> None:
        """Forget ``config``'s discovered tools (the server said they changed)."""
        self._tools.pop(config, None)
        self._failures.pop(config, None)
        self.changes[config.slug] = self.changes.get(config.slug, 0) + 1
        logger.info("MCP server %r: tool list changed", config.slug)

    def cached_tools(self, config: ServerConfig) -> tuple[McpTool, ...] | None:
        """The tools listed less than the TTL ago (``None``: list again); raises
        :class:`McpServerError` again for a listing that failed in the last ``FAILURE_TTL``."""
        failure = self._failures.get(config)
        if failure is not None and failure[0] >= time.monotonic():
            raise McpServerError(failure[1])
        entry = self._tools.get(config)
        if entry is None or entry[0] < time.monotonic():
            return None
        return entry[1]

    async def _list_tools(self, config: ServerConfig) -> tuple[McpTool, ...]:
        try:
            found = await self._fetch_tools(config)
        except McpServerError as exc:
            self._failures[config] = (time.monotonic() + FAILURE_TTL, str(exc))
            raise
        self._failures.pop(config, None)
        self._tools[config] = (time.monotonic() + app_settings.MCP_DISCOVERY_TTL_SECONDS, found)
        return found

    async def _fetch_tools(self, config: ServerConfig) -> tuple[McpTool, ...]:
        try:
            return await self._fetch_tools_once(config)
        except McpServerError as exc:
            if not _connection_closed(exc.__cause__):
                raise
        # The pooled connection broke under the listing (a server restarted between two
        # requests): listing is safe to repeat, on a new connection.
        return await self._fetch_tools_once(config)

    async def _fetch_tools_once(self, config: ServerConfig) -> tuple[McpTool, ...]:
        tools: list[McpTool] = []
        try:
            with _fail_after(config.connect_timeout):
                client = await self._session(config)
                cursor = None
                while True:
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(
                        McpTool(t.name, t.description or "", dict(t.input_schema or {}))
                        for t in page.tools
                    )
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except McpServerError:
            raise
        except TimeoutError as exc:
            self._drop(config)
            raise McpServerError(f"MCP server {config.slug!r}: listing tools timed out") from exc
        except Exception as exc:
            self._drop(config)
            raise McpServerError(
                f"MCP server {config.slug!r}: listing tools failed: {_describe(exc)}"
            ) from exc
        return tuple(tools)

    async def list_tools(self, config: ServerConfig) -> tuple[McpTool, ...]:
        """The server's tools (cached for the TTL); raises :class:`McpServerError`."""
        cached = self.cached_tools(config)
        if cached is not None:
            return cached
        return await self._run(lambda: self._list_tools(config))

    def list_tools_sync(self, config: ServerConfig) -> tuple[McpTool, ...]:
        """:meth:`list_tools` for synchronous callers (never from the pool's own loop)."""
        cached = self.cached_tools(config)
        if cached is not None:
            return cached
        future = self._submit(lambda: self._list_tools(config))
        try:
            return future.result(timeout=config.connect_timeout + 5.0)
        except concurrent.futures.TimeoutError as exc:
            future.cancel()
            raise McpServerError(f"MCP server {config.slug!r}: listing tools timed out") from exc

    # -- calls ---------------------------------------------------------------------------------

    async def _call_tool(
        self, config: ServerConfig, name: str, arguments: dict[str, Any], timeout: float
    ) -> McpCallResult:
        from mcp.shared.exceptions import MCPError

        try:
            with _fail_after(timeout):
                client = await self._session(config)
                result = await client.call_tool(name, arguments, read_timeout_seconds=timeout)
        except McpServerError:
            raise
        except TimeoutError as exc:
            raise McpServerError(
                f"MCP server {config.slug!r}: the call timed out after {timeout:g} s"
            ) from exc
        except MCPError as exc:
            if _connection_closed(exc):
                self._drop(config)  # the next call opens a new connection
            if "timed out" in str(exc):
                raise McpServerError(
                    f"MCP server {config.slug!r}: the call timed out after {timeout:g} s"
                ) from exc
            raise McpServerError(f"MCP server {config.slug!r}: {exc}") from exc
        except Exception as exc:
            # The transport broke: the next call opens a new connection.
            self._drop(config)
            raise McpServerError(
                f"MCP server {config.slug!r} is unreachable: {_describe(exc)}"
            ) from exc
        return McpCallResult(_result_text(result), bool(result.is_error))

    async def call_tool(
        self,
        config: ServerConfig,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None = None,
    ) -> McpCallResult:
        """Call tool ``name`` of the server; ``timeout`` seconds (default: the server's call
        timeout). Raises :class:`McpServerError` for an unreachable server, a protocol error
        or a timeout; a tool's own failure is a result with ``is_error``."""
        seconds = config.call_timeout if timeout is None else timeout
        return await self._run(lambda: self._call_tool(config, name, arguments, seconds))

    # -- shutdown ------------------------------------------------------------------------------

    async def _close_all(self) -> None:
        connections = list(self._connections.values())
        for connection in connections:
            connection.stop.set()
        await asyncio.gather(*(c.task for c in connections), return_exceptions=True)

    def close(self) -> None:
        """Close every connection (stdio servers exit) and stop the pool's loop; a later use
        starts a new one."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._close_all(), loop)
        try:
            future.result(timeout=CLOSE_TIMEOUT)
        except Exception:
            logger.warning("MCP connections did not close in %s s", CLOSE_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=CLOSE_TIMEOUT)
        if not thread.is_alive():
            loop.close()
        self._connections.clear()
        self._tools.clear()
        self._failures.clear()


#: The process's pool.
mcp_pool = McpClientPool()


def close_mcp_connections() -> None:
    """Close the process's MCP connections (at exit, and from the server shutdown hook)."""
    mcp_pool.close()


atexit.register(close_mcp_connections)
