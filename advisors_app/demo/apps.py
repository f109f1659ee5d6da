"""Django app configuration of the demo: registers the demo tools when Django is ready."""

from __future__ import annotations

from django.apps import AppConfig


class DemoConfig(AppConfig):
    name = "advisors_app.demo"
    label = "advisors_demo"
    verbose_name = "Advisors demo"

    def ready(self) -> None:
        from advisors_app.demo.tools import register_demo_tools

        register_demo_tools()
