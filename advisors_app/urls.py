"""HTTP routes of the app; a project mounts them with ``path("", include("advisors_app.urls"))``."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver

app_name = "advisors_app"

urlpatterns: list[URLPattern | URLResolver] = []
