"""How evaluators find their models: chat-model configurations first, then settings aliases."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import EvaluatorParamsError

if TYPE_CHECKING:
    from advisors_app.core.model import ChatModel

__all__ = ["DjangoEvaluatorServices"]


class DjangoEvaluatorServices:
    """Resolves a chat-model slug as the chains do.

    A ``ChatModelConfig`` row with that slug (admin → Chat models) wins and is built with
    ``create_chat_model(row.to_config())``; else an alias of ``ADVISORS["CHAT_MODELS"]`` or
    a built-in one (``get_chat_model(alias)``). ``None`` means the deployment's default alias
    (``ADVISORS["DEFAULT_CHAT_MODEL"]``), looked up the same way. Neither found, or a
    configuration the provider registry refuses: :class:`EvaluatorParamsError` on
    ``params.model``. Async: the row is read with the async ORM. The model is priced by its
    configuration when a meter admits its calls (:func:`advisors_app.costs.pricing.priced_as`).
    """

    async def chat_model(self, slug: str | None) -> ChatModel:
        from django.core.exceptions import ImproperlyConfigured

        from advisors_app.conf import app_settings
        from advisors_app.core.providers.registry import create_chat_model
        from advisors_app.costs.pricing import priced_as
        from advisors_app.definition.providers import chat_model_configs, get_chat_model
        from advisors_app.models import ChatModelConfig

        name = slug or app_settings.DEFAULT_CHAT_MODEL
        row = await ChatModelConfig.objects.filter(slug=name).afirst()
        try:
            if row is not None:
                config = row.to_config()
                return priced_as(create_chat_model(config, name=name), name, config)
            configs = chat_model_configs()
            if name in configs:
                return priced_as(get_chat_model(name), name, configs[name])
        except (ValueError, ImproperlyConfigured) as exc:
            raise EvaluatorParamsError({"params.model": [f"chat model {name!r}: {exc}"]}) from exc
        known = sorted(chat_model_configs())
        raise EvaluatorParamsError(
            {
                "params.model": [
                    f"No chat model {name!r}: no chat-model configuration (admin → Chat "
                    "models) has that slug and settings.ADVISORS['CHAT_MODELS'] has no such "
                    f"alias (aliases: {', '.join(known)})."
                ]
            }
        )
