"""Websocket routes of the app, for a project's Channels ``URLRouter``.

A project's ``asgi.py`` wraps them as
``CsrfOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))``: the origin check
(:mod:`advisors_app.origins`: scheme, host and port, as Django's CSRF protection checks them)
keeps pages of other sites and other ports out, the auth stack reads the session cookie.
"""

from __future__ import annotations

from django.urls import URLPattern, path

from advisors_app.consumers import ChatConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/chat/<slug:slug>/", ChatConsumer.as_asgi(), name="advisors-chat-ws"),
]
