"""Websocket routes of the app, for a project's Channels ``URLRouter``.

A project's ``asgi.py`` wraps them as
``AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))``.
"""

from __future__ import annotations

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
