"""Registers the ``append`` advisor type, as a third-party app would."""

from __future__ import annotations

from django.apps import AppConfig


class AdvisorPluginConfig(AppConfig):
    name = "tests.advisor_plugin"
    label = "advisor_plugin"

    def ready(self) -> None:
        from advisors_app.definition.registry import AdvisorType, advisor_types

        from .advisors import AppendAdvisor

        advisor_types.register(
            AdvisorType(
                key="append",
                label="Append text",
                factory=lambda spec: AppendAdvisor(spec.params["text"], spec.order),
                default_order=100,
                description="Appends text to the user message.",
                params_schema={
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "minLength": 1, "description": "The suffix."},
                        "note": {"type": "string", "x-reference": "word_list"},
                    },
                    "required": ["text"],
                    "additionalProperties": False,
                },
                request_params={"append_flag": {"type": "boolean"}},
            ),
            replace=True,
        )
