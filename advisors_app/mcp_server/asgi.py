"""The MCP endpoint as an ASGI application: token check, then the SDK's Streamable HTTP transport.

Mounted by the project next to Django (see :mod:`advisors_app.routing`, ``http_urlpatterns``),
because the SDK's transport is an ASGI application, not a Django view. For each request it:

1. answers 404 while ``ADVISORS["MCP_ENDPOINT_ENABLED"]`` is off (as if it were not mounted),
   and 400 for a ``Host`` that ``ALLOWED_HOSTS`` refuses (Django's check, which this path does
   not otherwise pass through);
2. authenticates ``Authorization: Token <key>`` — the REST API's tokens (DRF's
   ``rest_framework.authtoken``); ``Bearer <key>`` is accepted as well, the scheme MCP clients
   send. No token, an unknown one or an inactive user: 401, before anything runs (the
   message says whether the token was missing or invalid);
3. answers any method but ``POST`` with 405 (``Allow: POST``): in stateless JSON-response mode
   there is no server-to-client stream for a ``GET`` and no session to ``DELETE``;
4. hands the request, with the user in the scope under ``"user"``, to the SDK's
   ``StreamableHTTPSessionManager`` in **stateless** mode with JSON responses: every request
   stands alone (no MCP session kept in memory), so any number of server processes can serve
   one client, and each request is authenticated on its own.

As Django's own ASGI handler does, each request gets its thread-sensitive context and the
``request_started``/``request_finished`` signals, so database connections are handed back.

The session manager needs a running task group, which servers with the ASGI lifespan protocol
would give it at startup; daphne has none, so the first request of each event loop starts it
in a background task, and under daphne a shutdown hook stops it before the server exits.
"""

from __future__ import annotations

import asyncio
import json
import sys
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from asgiref.sync import ThreadSensitiveContext, sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import ImproperlyConfigured
from django.http.request import split_domain_port, validate_host

from advisors_app.conf import app_settings

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

__all__ = ["MCPEndpoint", "authenticate", "stop_endpoints"]

#: Authorization schemes carrying a REST API token.
SCHEMES = (b"token", b"bearer")


class MCPEndpoint:
    """The ASGI application serving chains as MCP tools (see the module docstring)."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"The MCP endpoint serves HTTP, not {scope['type']!r}.")
        if not app_settings.MCP_ENDPOINT_ENABLED:
            await _answer(send, 404, "not_found", f"No endpoint at {scope['path']}.")
            return
        if not _host_allowed(scope):
            await _answer(send, 400, "invalid", "The Host header is not in ALLOWED_HOSTS.")
            return
        async with ThreadSensitiveContext():
            await signals.request_started.asend(sender=self.__class__, scope=scope)
            try:
                user = await authenticate(scope)
                if user is None:
                    await _answer(
                        send,
                        401,
                        "not_authenticated",
                        "Invalid token: it is no active user's API token."
                        if _token_presented(scope)
                        else "Send your API token: Authorization: Token <key>.",
                        ((b"www-authenticate", b"Token"),),
                    )
                    return
                if scope["method"] != "POST":
                    # Stateless with JSON responses: no server-to-client stream to open (a GET
                    # would get an endless keep-alive stream) and no session to DELETE.
                    await _answer(
                        send,
                        405,
                        "method_not_allowed",
                        "The MCP endpoint takes POST requests only (stateless, JSON responses).",
                        ((b"allow", b"POST"),),
                    )
                    return
                manager = await _session_manager()
                await manager.handle_request({**scope, "user": user}, receive, send)
            finally:
                await signals.request_finished.asend(sender=self.__class__)


async def authenticate(scope: dict[str, Any]) -> Any:
    """The active user whose REST API token the request's ``Authorization`` header carries
    (``Token <key>`` or ``Bearer <key>``), else ``None``."""
    from rest_framework.authentication import TokenAuthentication
    from rest_framework.exceptions import AuthenticationFailed

    header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() not in SCHEMES:
        return None
    try:
        key = parts[1].decode("ascii")
        user, _ = await sync_to_async(TokenAuthentication().authenticate_credentials)(key)
    except (UnicodeDecodeError, AuthenticationFailed):
        return None
    return user


def _token_presented(scope: dict[str, Any]) -> bool:
    """Whether ``Authorization`` has the shape of a token (so a 401 says the token is wrong,
    not that none was sent)."""
    header = next((v for k, v in scope.get("headers", ()) if k == b"authorization"), b"")
    parts = header.split()
    return len(parts) == 2 and parts[0].lower() in SCHEMES


def _host_allowed(scope: dict[str, Any]) -> bool:
    """Django's ``HttpRequest.get_host`` check of the ``Host`` header (``X-Forwarded-Host``
    with ``USE_X_FORWARDED_HOST``) against ``ALLOWED_HOSTS`` (with its ``DEBUG`` defaults)."""
    headers = dict(scope.get("headers", ()))
    host = headers.get(b"host", b"")
    if settings.USE_X_FORWARDED_HOST and b"x-forwarded-host" in headers:
        host = headers[b"x-forwarded-host"]
    domain, _ = split_domain_port(host.decode("latin-1"))
    allowed = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]
    return bool(domain) and validate_host(domain, allowed)


async def _answer(
    send: Any, status: int, code: str, message: str, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> None:
    """A JSON error in the REST API's shape (``{"error": {"code", "message"}}``)."""
    from advisors_app.api.errors import error_body

    body = json.dumps(error_body(code, message)).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


@dataclass(eq=False)
class _Running:
    manager: StreamableHTTPSessionManager
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


#: The running session manager of each event loop (its task group lives on that loop).
_running: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Running] = (
    weakref.WeakKeyDictionary()
)


async def _session_manager() -> StreamableHTTPSessionManager:
    loop = asyncio.get_running_loop()
    running = _running.get(loop)
    if running is None:
        running = _running[loop] = _start()
    await running.ready.wait()
    assert running.task is not None
    if running.task.done():  # it could not start, or was stopped: the next request retries
        _running.pop(loop, None)
        raise RuntimeError("The MCP session manager is not running.")
    return running.manager


def _start() -> _Running:
    try:
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        from advisors_app.mcp_server.server import build_server
    except ImportError as exc:
        raise ImproperlyConfigured(
            'ADVISORS["MCP_ENDPOINT_ENABLED"] needs the MCP SDK: install the mcp extra '
            '(pip install "advisors-app[mcp]").'
        ) from exc

    manager = StreamableHTTPSessionManager(build_server(), stateless=True, json_response=True)
    running = _Running(manager)

    async def run() -> None:
        try:
            async with manager.run():
                running.ready.set()
                await asyncio.Future()  # until stopped
        finally:
            running.ready.set()

    running.task = asyncio.get_running_loop().create_task(run(), name="mcp-session-manager")
    _stop_before_daphne_exits()
    return running


async def stop_endpoints() -> None:
    """Stop the session manager of the running event loop (requests still in flight end)."""
    running = _running.pop(asyncio.get_running_loop(), None)
    if running is not None and running.task is not None:
        running.task.cancel()
        await asyncio.gather(running.task, return_exceptions=True)


_hooked = False


def _stop_before_daphne_exits() -> None:
    """Under daphne, stop the manager before the reactor shuts down (see
    :mod:`advisors_app.turn.shutdown`); elsewhere call :func:`stop_endpoints` yourself."""
    global _hooked
    if _hooked or "twisted.internet.reactor" not in sys.modules:
        return
    from twisted.internet import defer, reactor

    def before_shutdown() -> Any:
        return defer.Deferred.fromFuture(asyncio.ensure_future(stop_endpoints()))

    reactor.addSystemEventTrigger("before", "shutdown", before_shutdown)
    _hooked = True
