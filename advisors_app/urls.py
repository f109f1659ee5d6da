"""HTTP routes of the app; a project mounts them with ``path("", include("advisors_app.urls"))``."""

from __future__ import annotations

from django.urls import URLPattern, URLResolver, include, path

app_name = "advisors_app"

urlpatterns: list[URLPattern | URLResolver] = [
    path("api/", include("advisors_app.api.urls")),
]
