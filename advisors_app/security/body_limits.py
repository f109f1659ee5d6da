"""Request bodies over a size limit are refused before they are read, on every route.

Without a limit the server holds a whole body before anything checks who sent it: four anonymous
200 MB POSTs to ``/mcp/`` took a daphne process to 1 GB before their 401. Every HTTP request now
has a limit on its body, from ``ADVISORS["MAX_REQUEST_BODY_BYTES"]`` (1 MiB: a chat message, a
chain, an admin form), except the routes that take document uploads, which get what an upload
needs on top of it:

- ``POST /api/documents/`` (URL name ``api-documents``): ``UPLOAD_MAX_FILES`` files of
  ``MAX_UPLOAD_BYTES`` (no more than ``UPLOAD_BYTES_PER_DAY`` in all, when set), the quotas of
  :mod:`advisors_app.ingestion.uploads`;
- the admin's upload form (URL name ``advisors_app_collection_upload``): one file of
  ``MAX_UPLOAD_BYTES``.

A body over its limit gets 413 with the REST API's JSON error body (code ``too_large``,
:func:`advisors_app.api.errors.error_body`, whatever the route), before authentication, routing
or parsing: by its ``Content-Length`` before a byte of it is read, and a body without one
(``Transfer-Encoding: chunked``) as soon as the bytes received pass the limit.
``MAX_REQUEST_BODY_BYTES = 0`` turns every limit off. A proxy in front should refuse the same
bodies first (the README's nginx example: ``client_max_body_size``).

Two places enforce it, because servers differ in when an ASGI application first sees a request:

- :class:`BodyLimitMiddleware`, an ASGI middleware for the project's ``"http"`` application
  (``advisorsite/asgi.py``), for servers that hand the body over as the application reads it
  (uvicorn, hypercorn): it answers before calling the application when ``Content-Length`` is
  too large, and counts the bytes of ``http.request`` messages otherwise; past the limit it
  answers 413 and tells the application the client is gone (``http.disconnect``). The server
  drops the unread rest of the body. An application that answers before it reads (the MCP
  endpoint's 401) never has a chunked body counted: none of it was read.
- daphne reads a whole body before it calls the application (Twisted spools it to a temporary
  file, then daphne puts all of it in the application's queue at once, in memory), so no ASGI
  middleware can stop it. Constructing the middleware under daphne also replaces daphne's
  request class with a subclass that checks the same limits while Twisted parses the request:
  on the headers (``Content-Length``) and on each piece of body received; its 413 closes the
  connection. It also turns off Twisted's parsing of POSTed forms, which daphne never reads
  and which copies a multipart body in memory several times over (four anonymous 100 MB
  multipart POSTs within the upload limit: a 1.3 GB peak with it, 0.24 GB without). A body
  within its limit still sits in daphne's queue until Django has read it, so a daphne process
  holds up to a limit's worth per request: 101 MiB on the upload route by default.
"""

from __future__ import annotations

import inspect
import json
import logging
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from django.urls import Resolver404, resolve

from advisors_app.conf import app_settings

__all__ = [
    "UPLOAD_ROUTES",
    "BodyLimit",
    "BodyLimitMiddleware",
    "guard_daphne_request_bodies",
    "request_body_limit",
]

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_GENERAL = "ADVISORS['MAX_REQUEST_BODY_BYTES']"
#: How long daphne keeps reading (and dropping) a refused body after its 413, at most.
LINGER_SECONDS = 5.0


@dataclass(frozen=True)
class BodyLimit:
    """The most bytes a request body may have on one route, and the settings that say so."""

    most: int
    settings: str

    def message(self) -> str:
        return f"The request body is larger than {self.most} bytes ({self.settings})."


def _api_upload_files() -> tuple[int, str] | None:
    """Bytes of files one ``POST /api/documents/`` may carry (``None``: no bound)."""
    files, per_day = app_settings.UPLOAD_MAX_FILES, app_settings.UPLOAD_BYTES_PER_DAY
    most = app_settings.MAX_UPLOAD_BYTES * files if files else None
    if per_day and (most is None or per_day < most):
        return per_day, "ADVISORS['UPLOAD_BYTES_PER_DAY']"
    if most is None:
        return None
    return most, "ADVISORS['UPLOAD_MAX_FILES'] × ADVISORS['MAX_UPLOAD_BYTES']"


def _admin_upload_files() -> tuple[int, str] | None:
    """Bytes of the one file the admin's upload form takes."""
    return app_settings.MAX_UPLOAD_BYTES, "ADVISORS['MAX_UPLOAD_BYTES']"


#: URL names (in any namespace) of the routes that take uploads, and the bytes of files each
#: takes on top of ``MAX_REQUEST_BODY_BYTES`` (for the other form fields and the framing).
UPLOAD_ROUTES: dict[str, Callable[[], tuple[int, str] | None]] = {
    "api-documents": _api_upload_files,
    "advisors_app_collection_upload": _admin_upload_files,
}


def _general_limit() -> int:
    """``MAX_REQUEST_BODY_BYTES`` (0: no limit on any route)."""
    return max(app_settings.MAX_REQUEST_BODY_BYTES, 0)


def request_body_limit(path: str, root_path: str = "") -> BodyLimit | None:
    """The body limit of a request for ``path`` (as ASGI's ``scope["path"]``, under
    ``root_path``), ``None`` when there is none.

    The route is found as Django would find it (``FORCE_SCRIPT_NAME`` or the root path taken
    off the front); a path Django does not route (the MCP endpoint, a 404) has the general limit.
    """
    general = _general_limit()
    if not general:
        return None
    prefix = (settings.FORCE_SCRIPT_NAME or root_path or "").rstrip("/")
    if prefix and path.startswith(prefix + "/"):
        path = path.removeprefix(prefix)
    try:
        upload = UPLOAD_ROUTES.get(resolve(path).url_name or "")
    except Resolver404:
        upload = None
    if upload is None:
        return BodyLimit(general, f"{_GENERAL} = {general}")
    files = upload()
    if files is None:  # the upload settings set no bound
        return None
    most, named = files
    return BodyLimit(most + general, f"an upload: {named} = {most}, plus {_GENERAL} = {general}")


def _refusal(limit: BodyLimit) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """Headers and body of the 413 answer: the REST API's error shape, code ``too_large``."""
    from advisors_app.api.errors import error_body  # the API's modules import DRF

    body = json.dumps(error_body("too_large", limit.message())).encode()
    return [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))], body


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


class BodyLimitMiddleware:
    """ASGI middleware refusing request bodies over their route's limit (module docstring).

    Wrap the project's ``"http"`` application with it::

        "http": BodyLimitMiddleware(URLRouter([*http_urlpatterns, re_path(r"", django_asgi_app)]))

    Other scope types pass through untouched.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        guard_daphne_request_bodies()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        general = _general_limit() if scope["type"] == "http" else 0
        declared = _content_length(scope) if general else None
        if not general or (declared is not None and declared <= general):
            # A body of a declared length cannot grow past it: the server frames it.
            await self.app(scope, receive, send)
            return
        if declared is not None:
            limit = request_body_limit(scope["path"], scope.get("root_path", ""))
            if limit is not None and declared > limit.most:
                await _answer(send, limit)
                return
            await self.app(scope, receive, send)
            return
        await _CountedBody(scope, receive, send, general).run(self.app)


class _CountedBody:
    """One request of unknown length: its bytes counted as the application reads them."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, general: int) -> None:
        self.scope, self._receive, self._send = scope, receive, send
        self.general = general
        self.limit: BodyLimit | None = None  # the route's, looked up once the general one passed
        self.route_known = False
        self.received = 0
        self.refused = False
        self.answered = False

    async def run(self, app: ASGIApp) -> None:
        try:
            await app(self.scope, self.receive, self.send)
        except Exception:
            if not self.refused:
                raise
            # What the application made of a body cut short does not matter: 413 was the answer.
            logger.debug("The application failed on a refused request body.", exc_info=True)

    async def receive(self) -> Message:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] != "http.request":
            return message
        self.received += len(message.get("body", b""))
        if self.received <= self.general:
            return message
        if not self.route_known:
            self.route_known = True
            self.limit = request_body_limit(self.scope["path"], self.scope.get("root_path", ""))
        if self.limit is None or self.received <= self.limit.most:
            return message
        self.refused = True
        if not self.answered:
            await _answer(self._send, self.limit)
        # The application stops as it does for a client that left; its answer is dropped.
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.refused:
            return
        if message["type"] == "http.response.start":
            self.answered = True
        await self._send(message)


async def _answer(send: Send, limit: BodyLimit) -> None:
    headers, body = _refusal(limit)
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# -- daphne --------------------------------------------------------------------------------------


def guard_daphne_request_bodies() -> None:
    """Under daphne, check body limits while Twisted receives each request (module docstring).

    Does nothing unless daphne's HTTP module is loaded (its CLI and its ``runserver`` load it
    before the application); calling it again changes nothing.
    """
    module = sys.modules.get("daphne.http_protocol")
    if module is None or getattr(module.WebRequest, "limits_request_bodies", False):
        return
    # daphne's factory looks this name up for each connection it builds.
    module.WebRequest = _limited_web_request(module.WebRequest)


def _limited_web_request(web_request: type) -> type:
    """A subclass of daphne's ``WebRequest`` that refuses bodies over their limit."""
    from twisted.web import http

    parses_forms = "parsePOSTFormSubmission" in inspect.signature(http.Request).parameters

    class BodyLimitedWebRequest(web_request):  # type: ignore[misc]
        limits_request_bodies = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if parses_forms:
                kwargs.setdefault("parsePOSTFormSubmission", False)
            super().__init__(*args, **kwargs)
            self._body_limit: BodyLimit | None = None
            self._route_known = False
            self._body_received = 0
            self._body_refused = False

        def gotLength(self, length: int | None) -> None:
            super().gotLength(length)
            if length is not None:
                self._within_limit(length)

        def handleContentChunk(self, data: bytes) -> None:
            if self._body_refused:
                return
            self._body_received += len(data)
            if self._within_limit(self._body_received):
                super().handleContentChunk(data)

        def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:
            # The end of a refused body still arrives with the bytes read alongside the refusal.
            if not self._body_refused:
                super().requestReceived(command, path, version)

        def _within_limit(self, size: int) -> bool:
            general = _general_limit()
            if not general or size <= general:
                return True
            if not self._route_known:
                self._route_known = True
                self._body_limit = self._route_limit()
            if self._body_limit is None or size <= self._body_limit.most:
                return True
            self._refuse(self._body_limit, size)
            return False

        def _route_limit(self) -> BodyLimit | None:
            # Only the request line is parsed yet: the channel holds its target (HTTP/1.x).
            target = getattr(self.channel, "_path", None)
            if not isinstance(self.channel, http.HTTPChannel) or not isinstance(target, bytes):
                return None  # HTTP/2: the ASGI middleware counts the body instead
            header = self.requestHeaders.getRawHeaders(b"daphne-root-path")
            root_path = unquote(header[0].decode("ascii")) if header else self.server.root_path
            # The path daphne will put in the scope.
            path = unquote(target.split(b"?", 1)[0].decode("ascii", "replace"))
            return request_body_limit(path, root_path or "")

        def _refuse(self, limit: BodyLimit, size: int) -> None:
            from twisted.internet import reactor, tcp

            self._body_refused = True
            self.content.close()  # the spooled part of the body
            # Twisted answers "Expect: 100-continue" after this returns: the 413 is the answer.
            self.requestHeaders.removeHeader(b"expect")
            headers, body = _refusal(limit)
            head = b"".join(b"%s: %s\r\n" % h for h in [*headers, (b"connection", b"close")])
            transport = self.channel.transport
            transport.write(b"HTTP/1.1 413 Content Too Large\r\n" + head + b"\r\n" + body)
            if isinstance(transport, tcp.Connection):
                # A lingering close, as web servers make it: a socket closed while the client
                # still sends resets the connection, which can wipe out the 413 before the
                # client reads it. So the answer ends with a FIN, what still arrives is dropped
                # (above), and the connection is cut LINGER_SECONDS later unless closed by then.
                transport.loseWriteConnection()
                reactor.callLater(LINGER_SECONDS, transport.abortConnection)
            else:  # TLS: Twisted's own way with a bad request
                self.channel.loseConnection()
            logger.info("Refused a request body of %d bytes or more: %s", size, limit.message())

    return BodyLimitedWebRequest
