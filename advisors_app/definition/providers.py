"""The chat and embedding models named in ``settings.ADVISORS``, built once per configuration.

``get_chat_model()`` / ``get_embedding_model()`` return the model of the default alias
(``DEFAULT_CHAT_MODEL`` / ``DEFAULT_EMBEDDING_MODEL``), or of the alias given. Aliases come from
``ADVISORS["CHAT_MODELS"]`` / ``ADVISORS["EMBEDDING_MODELS"]`` plus the built-in offline
defaults, and are turned into models by :mod:`advisors_app.core.providers.registry`. Models are
cached until the ``ADVISORS`` setting changes (``setting_changed``). API keys are read from the
environment variables the configs name, at request time, and never stored.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

from advisors_app.conf import app_settings, cached_by_settings
from advisors_app.core.model import ChatModel, EmbeddingModel
from advisors_app.core.providers.registry import (
    BUILTIN_CHAT_MODELS,
    BUILTIN_EMBEDDING_MODELS,
    create_chat_model,
    create_embedding_model,
)

__all__ = ["chat_model_configs", "embedding_model_configs", "get_chat_model", "get_embedding_model"]


def chat_model_configs() -> dict[str, dict[str, Any]]:
    """Every chat-model alias with its config: the built-in ones, then the settings' ones."""
    return {**BUILTIN_CHAT_MODELS, **app_settings.CHAT_MODELS}


def embedding_model_configs() -> dict[str, dict[str, Any]]:
    """Every embedding-model alias with its config: the built-in ones, then the settings' ones."""
    return {**BUILTIN_EMBEDDING_MODELS, **app_settings.EMBEDDING_MODELS}


def get_chat_model(alias: str | None = None) -> ChatModel:
    """The chat model of ``alias`` (default: ``DEFAULT_CHAT_MODEL``).

    Raises ``ImproperlyConfigured`` naming the setting when the alias is unknown or its config
    is invalid.
    """
    return _chat_model(alias or app_settings.DEFAULT_CHAT_MODEL)


def get_embedding_model(alias: str | None = None) -> EmbeddingModel:
    """The embedding model of ``alias`` (default: ``DEFAULT_EMBEDDING_MODEL``); errors as
    :func:`get_chat_model`."""
    return _embedding_model(alias or app_settings.DEFAULT_EMBEDDING_MODEL)


@cached_by_settings
def _chat_model(alias: str) -> ChatModel:
    config = _config(chat_model_configs(), "CHAT_MODELS", alias)
    try:
        return create_chat_model(config, name=alias)
    except ValueError as exc:
        raise ImproperlyConfigured(f"settings.ADVISORS['CHAT_MODELS']: {exc}") from exc


@cached_by_settings
def _embedding_model(alias: str) -> EmbeddingModel:
    config = _config(embedding_model_configs(), "EMBEDDING_MODELS", alias)
    try:
        return create_embedding_model(config, name=alias)
    except ValueError as exc:
        raise ImproperlyConfigured(f"settings.ADVISORS['EMBEDDING_MODELS']: {exc}") from exc


def _config(configs: dict[str, Any], setting: str, alias: str) -> dict[str, Any]:
    if alias not in configs:
        raise ImproperlyConfigured(
            f"No model alias {alias!r} in settings.ADVISORS[{setting!r}]; known aliases: "
            f"{', '.join(sorted(configs))}"
        )
    return configs[alias]  # type: ignore[no-any-return]
