"""Chat-model and embedding-model configurations, editable in the admin.

A configuration names its provider, model, endpoint and the **name** of the environment
variable that holds the API key; the key itself is never stored (nor shown: the admin only
says whether the variable is set). :meth:`ModelConfig.to_config` is the mapping the provider
registry (``advisors_app.core.providers.registry``) builds a model from: the fields that apply
to the provider, plus ``settings`` — the provider's other keys (scripted: ``responses``,
``repeat``; openai: ``include_usage``, ``headers``, ``tool_call_emulation``; ...). A chat
model's ``context_window`` (tokens per request, blank: the provider's figure) is carried into
the mapping, so it is part of every snapshot that uses the row. Headers may
not carry credentials (``Authorization``, ``X-Api-Key``, a token-shaped value, ...):
:meth:`ModelConfig.clean` refuses them, as the key itself is only ever named.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

from advisors_app.validation import validate_json_value

__all__ = [
    "CONTEXT_WINDOW_RANGE",
    "PRICING_MODES",
    "PROVIDERS",
    "ChatModelConfig",
    "EmbeddingModelConfig",
    "ModelConfig",
]

#: Providers a configuration may name: the embedded models (SmolLM2 chat, MiniLM embeddings;
#: no key), any OpenAI-compatible server, and the scripted fake (chat only).
PROVIDERS = [
    ("embedded", "Embedded (in-process, no key)"),
    ("openai", "OpenAI-compatible HTTP API"),
    ("scripted", "Scripted (fake, for tests and demos)"),
]

#: A chat model's ``context_window`` range in tokens: fewer than 16 hold no prompt and answer;
#: the most is PostgreSQL's ``integer``.
CONTEXT_WINDOW_RANGE = (16, 2_147_483_647)
# One message for either end (and for 0 or a negative number, which the form lets through to
# these validators), rather than Django's "greater/less than or equal to" per bound.
_WINDOW_MESSAGE = (
    f"Enter a number of tokens from {CONTEXT_WINDOW_RANGE[0]} to {CONTEXT_WINDOW_RANGE[1]}, "
    "or leave it blank for the provider's figure."
)

#: How a chat model's calls are priced: ``auto`` — an admin price, else the packaged
#: genai-prices data, else unknown; ``manual`` — an admin price, else unknown; ``free`` — an
#: admin price, else zero.
PRICING_MODES = [
    ("auto", "Auto (admin price, else genai-prices)"),
    ("manual", "Manual (admin price only)"),
    ("free", "Free"),
]

env_var_name = RegexValidator(
    r"^[A-Za-z_][A-Za-z0-9_]*$",
    "Enter the NAME of an environment variable (for example OPENAI_API_KEY), never the key.",
)


_FIELDS = (
    "model",
    "base_url",
    "api_key_env",
    "timeout",
    "max_retries",
    "options",
    "dimensions",
    "context_window",
)


def _field_of(message: str) -> str:
    """The form field a provider-registry message is about (``__all__`` when unclear)."""
    if "unknown key" in message or "'responses'" in message:
        return "settings"
    named = [f for f in _FIELDS if f"'{f}'" in message]
    if "provider" in message and not named:
        return "provider"
    return named[0] if len(named) == 1 else "__all__"


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
        help_text="Name of the environment variable that holds the API key (not the key). "
        "Blank: OPENAI_API_KEY for OpenAI itself, no key for a server at a base URL.",
    )
    timeout = models.FloatField(
        default=60.0,
        validators=[MinValueValidator(0.1)],
        help_text="Seconds to wait for the provider before giving up.",
    )
    max_retries = models.PositiveSmallIntegerField(
        default=2, help_text="Retries of a failed provider request (timeouts, 429, 5xx)."
    )
    settings = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_json_value],
        help_text='Other provider settings as a JSON object, e.g. scripted: {"responses": '
        '["Hi!"], "repeat": true}; openai: {"include_usage": true}.',
    )
    updated_at = models.DateTimeField(auto_now=True)

    #: ``"chat"`` or ``"embedding"`` (the provider registry's kind).
    kind = ""

    class Meta:
        abstract = True
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        from advisors_app.core.providers.registry import validate_model_config
        from advisors_app.security.redaction import secret_header_problems

        if not isinstance(self.settings, dict):
            raise ValidationError({"settings": "Enter a JSON object."})
        # Keys are only ever named (api_key_env); a header would store one in the database,
        # in every published snapshot and in the admin's pages.
        problems = secret_header_problems(self.settings.get("headers"))
        if problems:
            raise ValidationError({"settings": problems})
        # Nor in the URL: a user:password or a key in the query string would be stored, shown
        # and sent as a credential the provider may quote back in its errors.
        url = urlsplit(self.base_url or "")
        if url.username or url.password or url.query:
            raise ValidationError(
                {
                    "base_url": "Put no credentials or query string in the URL: name the key's "
                    "environment variable in api_key_env."
                }
            )
        try:
            validate_model_config(self._checked_config(), self.kind, self.slug)
        except ValueError as exc:
            raise ValidationError({_field_of(str(exc)): str(exc)}) from exc

    def _checked_config(self) -> dict[str, Any]:
        """What :meth:`clean` hands the provider registry: :meth:`to_config`."""
        return self.to_config()

    @property
    def key_present(self) -> bool | None:
        """Whether the API key variable is set in this process (``None``: none is needed)."""
        from advisors_app.core.providers.registry import api_key_env_of

        name = api_key_env_of(self.to_config())
        return None if name is None else bool(os.environ.get(name))

    def _connection(self) -> dict[str, Any]:
        config: dict[str, Any] = {}
        if self.base_url:
            config["base_url"] = self.base_url
        if self.api_key_env:
            config["api_key_env"] = self.api_key_env
        config["timeout"] = self.timeout
        config["max_retries"] = self.max_retries
        return config

    def to_config(self) -> dict[str, Any]:
        """The provider registry's mapping for this row (JSON-compatible, holds no secret)."""
        raise NotImplementedError


class ChatModelConfig(ModelConfig):
    """A chat model a chain (or an advisor needing its own model) can use."""

    options = models.JSONField(
        default=dict,
        blank=True,
        help_text='Default chat options as JSON, e.g. {"temperature": 0.2}.',
    )
    context_window = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[
            MinValueValidator(CONTEXT_WINDOW_RANGE[0], message=_WINDOW_MESSAGE),
            MaxValueValidator(CONTEXT_WINDOW_RANGE[1], message=_WINDOW_MESSAGE),
        ],
        help_text="Tokens per request, prompt and answer (blank: the provider's figure).",
    )
    #: How calls are priced (:mod:`advisors_app.costs.pricing`); admin prices (``ModelPrice``)
    #: win in every mode. Not part of chain snapshots: a price fix changes no version.
    pricing = models.CharField(
        max_length=8,
        choices=PRICING_MODES,
        blank=True,
        help_text="Blank: free for embedded, scripted, private servers; else auto.",
    )

    kind = "chat"

    class Meta(ModelConfig.Meta):
        verbose_name = "chat model"

    def clean(self) -> None:
        from advisors_app.validation import chat_options_errors

        errors = chat_options_errors(self.options, "")
        if errors:
            raise ValidationError(
                {"options": [f"{f}: {m}" if f else m for f, ms in errors.items() for m in ms]}
            )
        super().clean()

    def _checked_config(self) -> dict[str, Any]:
        config = super()._checked_config()
        low, high = CONTEXT_WINDOW_RANGE
        window = self.context_window
        if window is not None and not low <= window <= high:
            # The field's validators already refuse it, in one message; the registry's
            # "must be positive" / "at most 4096" would be a second, disagreeing one.
            config.pop("context_window", None)
        return config

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"provider": self.provider}
        if self.model:
            config["model"] = self.model
        if self.options:
            config["options"] = self.options
        # Only when set: a blank window leaves the provider's figure (embedded: 4096) and the
        # snapshots of rows without one unchanged.
        if self.context_window is not None:
            config["context_window"] = self.context_window
        if self.provider == "embedded":
            config["timeout"] = self.timeout
        elif self.provider == "openai":
            config.update(self._connection())
        return {**config, **(self.settings or {})}


class EmbeddingModelConfig(ModelConfig):
    """An embedding model for collections and the semantic cache; vectors of ``dimensions``."""

    dimensions = models.PositiveIntegerField(
        default=384, help_text="Length of the vectors the model returns (MiniLM: 384)."
    )

    kind = "embedding"

    class Meta(ModelConfig.Meta):
        verbose_name = "embedding model"

    def clean(self) -> None:
        super().clean()
        if self.provider == "embedded" and self.dimensions != 384:
            raise ValidationError({"dimensions": "The embedded model returns 384 dimensions."})

    def to_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {"provider": self.provider}
        if self.model:
            config["model"] = self.model
        if self.provider == "openai":
            config.update(self._connection())
            config["dimensions"] = self.dimensions
        return {**config, **(self.settings or {})}
