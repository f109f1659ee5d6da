"""The example site as an app: it registers the deployment check of its middleware."""

from __future__ import annotations

from django.apps import AppConfig


class AdvisorSiteConfig(AppConfig):
    name = "advisorsite"
    verbose_name = "Example site"

    def ready(self) -> None:
        from advisorsite import middleware  # noqa: F401 - registers check_middleware
