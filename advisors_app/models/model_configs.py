"""Chat-model and embedding-model configurations, editable in the admin.

A configuration names its provider, model, endpoint and the **name** of the environment
variable that holds the API key; the key itself is never stored (nor shown: the admin only
says whether the variable is set). :meth:`ModelConfig.to_config` is the mapping the provider
registry builds a model from.
"""

from __future__ import annotations

import os
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models

__all__ = ["PROVIDERS", "ChatModelConfig", "EmbeddingModelConfig", "ModelConfig"]

#: Providers a configuration may name: the embedded llama/MiniLM models, any OpenAI-compatible
#: server, and the scripted fake (``options``: ``responses``, ``repeat``, ``chunk_delay``).
PROVIDERS = [
    ("embedded", "Embedded (in-process, no key)"),
    ("openai", "OpenAI-compatible HTTP API"),
    ("scripted", "Scripted (fake, for tests and demos)"),
]

env_var_name = RegexValidator(
    r"^[A-Za-z_][A-Za-z0-9_]*$",
    "Enter the NAME of an environment variable (for example OPENAI_API_KEY), never the key.",
)


class ModelConfig(models.Model):
    """Fields shared by chat and embedding model configurations."""

    slug = models.SlugField(max_length=100, unique=True, help_text="Key chains refer to.")
    name = models.CharField(max_length=200, blank=True)
    provider = models.CharField(max_length=32, choices=PROVIDERS, default="embedded")
    model = models.CharField(
        max_length=200, blank=True, help_text="Model name sent to the provider."
    )
    base_url = models.URLField(
        max_length=500, blank=True, help_text="Endpoint of an OpenAI-compatible server."
    )
    api_key_env = models.CharField(
        "API key variable",
        max_length=100,
        blank=True,
        validators=[env_var_name],
        help_text="Name of the environment variable that holds the API key (not the key).",
    )
    options = models.JSONField(
        default=dict, blank=True, help_text="Provider options as a JSON object."
    )
    timeout = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(0.1)],
        help_text="Seconds to wait for the provider before giving up.",
    )
    max_retries = models.PositiveSmallIntegerField(
        default=2, help_text="Retries of a failed provider request (timeouts, 429, 5xx)."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        errors: dict[str, str] = {}
        if not isinstance(self.options, dict):
            errors["options"] = "Enter a JSON object."
        if self.provider == "openai" and not self.base_url and not self.api_key_env:
            errors["api_key_env"] = (
                "An OpenAI-compatible provider needs a base URL or an API key variable."
            )
        if errors:
            raise ValidationError(errors)

    @property
    def key_present(self) -> bool | None:
        """Whether the API key variable is set in this process (``None``: no variable named)."""
        if not self.api_key_env:
            return None
        return bool(os.environ.get(self.api_key_env))

    def to_config(self) -> dict[str, Any]:
        """The mapping the provider registry builds a model from (JSON-compatible, no secret)."""
        return {
            "provider": self.provider,
            "model": self.model,
            "base_url": self.base_url or None,
            "api_key_env": self.api_key_env or None,
            "options": dict(self.options or {}),
            "timeout": self.timeout,
            "max_retries": self.max_retries,
        }


class ChatModelConfig(ModelConfig):
    """A chat model a chain (or an advisor needing its own model) can use."""

    class Meta(ModelConfig.Meta):
        verbose_name = "chat model"


class EmbeddingModelConfig(ModelConfig):
    """An embedding model for collections and the semantic cache; vectors of ``dimensions``."""

    dimensions = models.PositiveIntegerField(
        default=384, help_text="Length of the vectors the model returns."
    )

    class Meta(ModelConfig.Meta):
        verbose_name = "embedding model"

    def to_config(self) -> dict[str, Any]:
        return {**super().to_config(), "dimensions": self.dimensions}
