"""HTTP routes of the app; a project mounts them with ``path("", include("advisors_app.urls"))``."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path

from advisors_app.pages import views

app_name = "advisors_app"

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/", include("advisors_app.api.urls")),
    path("chat/", views.chat, name="chat"),
    path("chat/c/<str:conversation_id>/", views.chat, name="chat-conversation"),
    path("chat/traces/<str:trace_id>/", views.trace, name="chat-trace"),
]
