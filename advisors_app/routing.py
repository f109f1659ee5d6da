"""Websocket routes of the app, for a project's Channels ``URLRouter``.

A project's ``asgi.py`` wraps them as
``AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))``:
the origin check keeps pages of other sites out, the auth stack reads the session cookie.
"""

from __future__ import annotations

from django.urls import URLPattern, path

from advisors_app.consumers import ChatConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/chat/<slug:slug>/", ChatConsumer.as_asgi(), name="advisors-chat-ws"),
]
