"""Routes of the app for a project's Channels ``URLRouter``s: websockets, and the MCP endpoint.

A project's ``asgi.py`` wraps the websocket routes as
``CsrfOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))``: the origin check
(:mod:`advisors_app.security.origins`: scheme, host and port, as Django's CSRF protection checks
them) keeps pages of other sites and other ports out, the auth stack reads the session cookie.

``http_urlpatterns`` holds the MCP endpoint (:mod:`advisors_app.mcp_server`, ``/mcp/``, with or
without the slash), an ASGI application rather than a Django view; put it before Django:
``URLRouter([*http_urlpatterns, re_path(r"", django_asgi_app)])``. It checks its own token and
answers 404 unless ``ADVISORS["MCP_ENDPOINT_ENABLED"]`` is on.
"""

from __future__ import annotations

from django.urls import URLPattern, path, re_path

from advisors_app.channels.consumers import ChatConsumer
from advisors_app.mcp_server import MCPEndpoint

__all__ = ["http_urlpatterns", "websocket_urlpatterns"]

websocket_urlpatterns: list[URLPattern] = [
    path("ws/chat/<slug:slug>/", ChatConsumer.as_asgi(), name="advisors-chat-ws"),
]

http_urlpatterns: list[URLPattern] = [
    re_path(r"^mcp/?$", MCPEndpoint(), name="advisors-mcp"),
]
