"""The websocket ``Origin`` check, with the rules of Django's CSRF protection.

A browser sends cookies with a websocket handshake to any site, so a page of another origin could
open a socket as the logged-in user; the ``Origin`` header is what tells them apart. Channels'
``AllowedHostsOriginValidator`` compares only the origin's host name with ``ALLOWED_HOSTS``:
``http://127.0.0.1:9999`` (any other program on the machine) and ``http://`` pages of an
``https://`` site get in, where ``CsrfViewMiddleware`` refuses the same page's POST.

:class:`CsrfOriginValidator` accepts a handshake when its ``Origin`` is what Django's CSRF check
accepts for an HTTP request to the same address:

- the site itself: the scheme (``https`` for ``wss``, or as ``SECURE_PROXY_SSL_HEADER`` says
  behind a proxy), the ``Host`` header (``X-Forwarded-Host`` with ``USE_X_FORWARDED_HOST``),
  valid for ``ALLOWED_HOSTS``, and the port, all equal; or
- an entry of ``CSRF_TRUSTED_ORIGINS``: scheme, host and port equal, or a ``*.`` wildcard entry
  (``https://*.example.com``) for its subdomains, with the same scheme and port.

Everything else is refused before the application sees the connection (the server answers the
handshake with 403): another port, another scheme, another host, ``Origin: null`` and no
``Origin`` at all. Default ports count as written out (``https://example.com`` is
``https://example.com:443``). Settings are read per connection, so ``override_settings`` applies.

Use it where a project would put Channels' validator::

    "websocket": CsrfOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.http.request import split_domain_port, validate_host
from django.utils.http import is_same_domain

__all__ = ["CsrfOriginValidator", "origin_allowed"]

logger = logging.getLogger(__name__)

_DEFAULT_PORTS = {"http": "80", "https": "443"}
_DEBUG_HOSTS = [".localhost", "127.0.0.1", "[::1]"]  # Django's ALLOWED_HOSTS under DEBUG


def _headers(scope: Mapping[str, Any]) -> dict[str, str]:
    """The scope's headers by lower-case name (the first of repeated ones), decoded as latin-1."""
    headers: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
    return headers


def _scheme(scope: Mapping[str, Any], headers: Mapping[str, str]) -> str:
    """``https`` or ``http``, as ``HttpRequest.scheme`` would say for this connection."""
    if settings.SECURE_PROXY_SSL_HEADER:
        meta_name, secure_value = settings.SECURE_PROXY_SSL_HEADER
        name = meta_name.removeprefix("HTTP_").lower().replace("_", "-")
        value = headers.get(name)
        if value is not None:
            return "https" if value.split(",", 1)[0].strip() == secure_value else "http"
    return "https" if scope.get("scheme") in ("wss", "https") else "http"


def _raw_host(scope: Mapping[str, Any], headers: Mapping[str, str]) -> str:
    """The ``host[:port]`` the client asked for, as ``HttpRequest.get_host`` reads it."""
    if settings.USE_X_FORWARDED_HOST and "x-forwarded-host" in headers:
        return headers["x-forwarded-host"]
    if "host" in headers:
        return headers["host"]
    server = scope.get("server")
    if server and server[1] is not None:
        return f"{server[0]}:{server[1]}"
    return ""


def _address(scheme: str, netloc: str) -> tuple[str, str, str] | None:
    """``(scheme, host, port)`` with the default port written out; ``None`` if malformed."""
    if scheme not in _DEFAULT_PORTS:
        return None
    domain, port = split_domain_port(netloc)
    if not domain:
        return None
    return scheme, domain, port or _DEFAULT_PORTS[scheme]


def _parse_origin(origin: str) -> tuple[str, str, str] | None:
    try:
        parts = urlsplit(origin)
    except ValueError:
        return None
    if parts.username is not None or parts.path not in ("", "/") or parts.query:
        return None
    return _address(parts.scheme.lower(), parts.netloc)


def _trusted(origin: tuple[str, str, str], trusted_origins: Iterable[str]) -> bool:
    """``CSRF_TRUSTED_ORIGINS`` as ``CsrfViewMiddleware`` reads it: exact entries, or
    ``scheme://*.domain[:port]`` for the domain's subdomains on that scheme and port."""
    scheme, domain, port = origin
    for entry in trusted_origins:
        if "*" not in entry:
            if _parse_origin(entry) == origin:
                return True
            continue
        parts = urlsplit(entry)
        if not parts.netloc.startswith("*."):
            continue
        pattern = _address(parts.scheme.lower(), parts.netloc[2:])
        if pattern is None or (pattern[0], pattern[2]) != (scheme, port):
            continue
        if is_same_domain(domain, "." + pattern[1]):
            return True
    return False


def origin_allowed(scope: Mapping[str, Any]) -> bool:
    """Whether the websocket ``scope``'s ``Origin`` is the site's own or a trusted one.

    The rules of ``CsrfViewMiddleware`` (see the module docstring); ``False`` without an
    ``Origin`` header or with one that is not ``scheme://host[:port]``.
    """
    headers = _headers(scope)
    raw_origin = headers.get("origin")
    origin = None if raw_origin is None else _parse_origin(raw_origin.strip())
    if origin is None:
        return False
    domain, port = split_domain_port(_raw_host(scope, headers))
    allowed_hosts = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = _DEBUG_HOSTS
    if domain and validate_host(domain, allowed_hosts):
        scheme = _scheme(scope, headers)
        if origin == (scheme, domain, port or _DEFAULT_PORTS[scheme]):
            return True
    return _trusted(origin, settings.CSRF_TRUSTED_ORIGINS)


class CsrfOriginValidator:
    """ASGI middleware for websockets: refuses a handshake whose ``Origin`` fails
    :func:`origin_allowed` (the server answers 403) and passes the others to ``application``.

    Replaces Channels' ``AllowedHostsOriginValidator``, which ignores scheme and port.
    Raises ``ValueError`` for a scope that is not a websocket's.
    """

    def __init__(self, application: Any) -> None:
        self.application = application
        self._denier = WebsocketDenier.as_asgi()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> Any:
        if scope["type"] != "websocket":
            raise ValueError(
                f"CsrfOriginValidator checks websocket connections only, got {scope['type']!r}: "
                "put it under ProtocolTypeRouter's 'websocket' key."
            )
        if origin_allowed(scope):
            return await self.application(scope, receive, send)
        logger.warning(
            "Websocket %s refused: its Origin %r is neither the site's own nor in "
            "CSRF_TRUSTED_ORIGINS",
            scope.get("path", ""),
            _headers(scope).get("origin"),
        )
        return await self._denier(scope, receive, send)
