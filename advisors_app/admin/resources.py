"""Admin of what chains refer to: model configurations, sensitive-word lists, templates.

None of them can be deleted while a labelled chain version refers to it (the delete page says
which); editing one changes drafts, never what a label serves.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db import models
from django.utils.html import format_html

from advisors_app.admin.costs import price_status
from advisors_app.admin.forms import PromptTemplateForm, SensitiveWordListForm
from advisors_app.admin.protected import ReferencedByVersionsAdmin
from advisors_app.admin.widgets import TEXTAREA_OVERRIDES
from advisors_app.core.providers.key_envs import key_env_problem
from advisors_app.core.providers.registry import api_key_env_of
from advisors_app.models import (
    ChatModelConfig,
    EmbeddingModelConfig,
    PromptTemplate,
    SensitiveWordList,
)
from advisors_app.models.model_configs import ModelConfig

__all__ = [
    "ChatModelConfigAdmin",
    "EmbeddingModelConfigAdmin",
    "PromptTemplateAdmin",
    "SensitiveWordListAdmin",
]


class ModelConfigAdmin(ReferencedByVersionsAdmin):
    """Shows whether the key's environment variable is set in this process — never its value."""

    list_display = ("slug", "name", "provider", "model", "api_key_env", "key_status", "updated_at")
    list_filter = ("provider",)
    search_fields = ("slug", "name", "model")
    readonly_fields = ("key_status",)
    formfield_overrides = {**TEXTAREA_OVERRIDES, models.URLField: {"assume_scheme": "https"}}

    @admin.display(description="API key")
    def key_status(self, obj: ModelConfig) -> str:
        # A row stored before the rule on key variables: say so rather than "is set".
        name = api_key_env_of(obj.to_config())
        if name and key_env_problem(name):
            return format_html('<span style="color:#ba2121">{} may not be read</span>', name)
        present = obj.key_present
        if present is None:
            return "not needed" if obj.provider != "openai" else "no variable named"
        if present:
            return format_html('<span style="color:#2a7d2a">{} is set</span>', obj.api_key_env)
        return format_html('<span style="color:#ba2121">{} is NOT set</span>', obj.api_key_env)


@admin.register(ChatModelConfig)
class ChatModelConfigAdmin(ModelConfigAdmin):
    """Also shows how the model's calls are priced: an unknown price is flagged."""

    list_display = (
        *ModelConfigAdmin.list_display[:5],
        "context_window",
        "price",
        *ModelConfigAdmin.list_display[5:],
    )
    readonly_fields = (*ModelConfigAdmin.readonly_fields, "price")
    fields = (
        "slug",
        "name",
        "provider",
        "model",
        "base_url",
        "api_key_env",
        "key_status",
        "timeout",
        "max_retries",
        "context_window",
        "pricing",
        "price",
        "options",
        "settings",
    )

    @admin.display(description="Price")
    def price(self, obj: ChatModelConfig) -> str:
        """The price its calls get now, and where from; ``unknown`` flagged."""
        return price_status(obj)

    def formfield_for_dbfield(self, db_field: Any, request: Any, **kwargs: Any) -> Any:
        if db_field.name == "context_window":
            # Not the form's own "greater than or equal to 0" for a negative number: the
            # model's validators say the one range message for every value out of it.
            kwargs["min_value"] = None
        return super().formfield_for_dbfield(db_field, request, **kwargs)


@admin.register(EmbeddingModelConfig)
class EmbeddingModelConfigAdmin(ModelConfigAdmin):
    list_display = (*ModelConfigAdmin.list_display[:4], "dimensions", "key_status", "updated_at")
    fields = (
        "slug",
        "name",
        "provider",
        "model",
        "dimensions",
        "base_url",
        "api_key_env",
        "key_status",
        "timeout",
        "max_retries",
        "settings",
    )


@admin.register(SensitiveWordList)
class SensitiveWordListAdmin(ReferencedByVersionsAdmin):
    form = SensitiveWordListForm
    formfield_overrides = TEXTAREA_OVERRIDES
    list_display = ("slug", "name", "word_count", "updated_at")
    search_fields = ("slug", "name", "words")

    @admin.display(description="Words")
    def word_count(self, obj: SensitiveWordList) -> int:
        return len(obj.words)


@admin.register(PromptTemplate)
class PromptTemplateAdmin(ReferencedByVersionsAdmin):
    form = PromptTemplateForm
    formfield_overrides = TEXTAREA_OVERRIDES
    list_display = ("slug", "name", "placeholder_list", "updated_at")
    search_fields = ("slug", "name", "text")

    @admin.display(description="Placeholders")
    def placeholder_list(self, obj: PromptTemplate) -> str:
        return ", ".join(f"{{{p}}}" for p in obj.placeholders)
