"""Models by settings alias: built-in offline defaults, configured aliases, cache reset."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from advisors_app.core import ScriptedChatModel
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.core.providers.embedded_smollm2 import SmolLm2ChatModel
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.definition.providers import (
    chat_model_configs,
    get_chat_model,
    get_embedding_model,
)

SCRIPTED = {"CHAT_MODELS": {"demo": {"provider": "scripted", "responses": ["hi"]}}}


def test_the_defaults_need_no_settings() -> None:
    with override_settings(ADVISORS={}):
        assert isinstance(get_chat_model(), SmolLm2ChatModel)
        assert get_chat_model() is get_chat_model("smollm2-135m-instruct")
        assert isinstance(get_embedding_model(), MiniLmEmbeddingModel)


def test_configured_aliases_and_the_default_alias() -> None:
    advisors = {
        **SCRIPTED,
        "DEFAULT_CHAT_MODEL": "demo",
        "CHAT_MODELS": {
            **SCRIPTED["CHAT_MODELS"],
            "hosted": {"provider": "openai", "model": "gpt-4o-mini"},
        },
    }
    with override_settings(ADVISORS=advisors):
        assert isinstance(get_chat_model(), ScriptedChatModel)
        assert isinstance(get_chat_model("hosted"), OpenAiCompatibleChatModel)
        assert set(chat_model_configs()) == {"smollm2-135m-instruct", "demo", "hosted"}


def test_models_are_cached_until_the_setting_changes() -> None:
    with override_settings(ADVISORS=SCRIPTED):
        first = get_chat_model("demo")
        assert get_chat_model("demo") is first
    with override_settings(ADVISORS=SCRIPTED):
        assert get_chat_model("demo") is not first


def test_unknown_aliases_and_bad_configs_fail_with_the_setting_named() -> None:
    with override_settings(ADVISORS={}), pytest.raises(ImproperlyConfigured, match="'nope'"):
        get_chat_model("nope")
    broken = {"EMBEDDING_MODELS": {"e": {"provider": "openai"}}}
    with (
        override_settings(ADVISORS=broken),
        pytest.raises(ImproperlyConfigured, match=r"EMBEDDING_MODELS'\]: .*needs a 'model'"),
    ):
        get_embedding_model("e")
