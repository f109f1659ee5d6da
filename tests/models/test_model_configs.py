"""Model configurations name the key's environment variable and never hold the key."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.core.exceptions import ValidationError
from django.test import RequestFactory

from advisors_app.models import ChatModelConfig, EmbeddingModelConfig

pytestmark = pytest.mark.django_db


def errors_of(config: object) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        config.full_clean()  # type: ignore[attr-defined]
    return caught.value.message_dict


@pytest.mark.parametrize("value", ["sk-proj-abc123", "MY KEY", "1KEY"])
def test_the_key_field_takes_a_variable_name_not_a_key(value: str) -> None:
    config = ChatModelConfig(slug="gpt", provider="openai", model="gpt-4o", api_key_env=value)
    assert "NAME of an environment variable" in errors_of(config)["api_key_env"][0]


def test_provider_registry_errors_land_on_the_field_they_are_about() -> None:
    assert errors_of(ChatModelConfig(slug="gpt", provider="openai")) == {
        "model": ["chat model 'gpt': provider 'openai' needs a 'model'"]
    }
    scripted = ChatModelConfig(slug="s", provider="scripted", settings={"responses": [1]})
    assert list(errors_of(scripted)) == ["settings"]
    local = ChatModelConfig(slug="l", provider="embedded", settings={"headers": {}})
    assert "unknown key(s) headers" in errors_of(local)["settings"][0]
    ChatModelConfig(slug="gpt", provider="openai", model="gpt-4o").full_clean()


def test_chat_options_are_checked() -> None:
    config = ChatModelConfig(slug="s", provider="scripted", options={"temperature": "hot"})
    assert list(errors_of(config)) == ["options"]


def test_key_presence_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ChatModelConfig(
        slug="gpt", provider="openai", model="gpt-4o", api_key_env="ADVISORS_TEST_KEY"
    )
    monkeypatch.delenv("ADVISORS_TEST_KEY", raising=False)
    assert config.key_present is False
    monkeypatch.setenv("ADVISORS_TEST_KEY", "secret")
    assert config.key_present is True
    assert "secret" not in str(config.to_config())
    assert ChatModelConfig(slug="local").key_present is None
    local_server = ChatModelConfig(
        slug="vllm", provider="openai", model="m", base_url="http://127.0.0.1:8001/v1"
    )
    assert local_server.key_present is None  # a server at a base URL needs no key by default


def test_to_config_is_the_provider_registry_mapping() -> None:
    assert ChatModelConfig(
        slug="gpt",
        provider="openai",
        model="gpt-4o-mini",
        api_key_env="K",
        options={"temperature": 0.2},
        settings={"include_usage": True},
    ).to_config() == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "options": {"temperature": 0.2},
        "api_key_env": "K",
        "timeout": 60.0,
        "max_retries": 2,
        "include_usage": True,
    }
    assert ChatModelConfig(slug="local").to_config() == {"provider": "embedded", "timeout": 60.0}
    assert EmbeddingModelConfig(
        slug="e",
        provider="openai",
        model="text-embedding-3-small",
        api_key_env="K",
        dimensions=1536,
    ).to_config() == {
        "provider": "openai",
        "model": "text-embedding-3-small",
        "api_key_env": "K",
        "timeout": 60.0,
        "max_retries": 2,
        "dimensions": 1536,
    }
    assert EmbeddingModelConfig(slug="mini").to_config() == {"provider": "embedded"}


def test_the_embedded_embedding_model_has_384_dimensions() -> None:
    assert errors_of(EmbeddingModelConfig(slug="mini", dimensions=768)) == {
        "dimensions": ["The embedded model returns 384 dimensions."]
    }


_WINDOW_RANGE = (
    "Enter a number of tokens from 16 to 2147483647, or leave it blank for the provider's figure."
)


@pytest.mark.parametrize(
    ("provider", "value", "message"),
    [
        ("openai", "0", _WINDOW_RANGE),
        ("openai", "-1", _WINDOW_RANGE),
        ("openai", "15", _WINDOW_RANGE),
        ("openai", "99999999999", _WINDOW_RANGE),
        ("embedded", "0", _WINDOW_RANGE),
        ("embedded", "-1", _WINDOW_RANGE),
        ("embedded", "99999999999", _WINDOW_RANGE),
        (
            "embedded",
            "5000",
            "chat model 's': 'context_window' of the embedded model is at most 4096 "
            "(one llama.cpp slot), got 5000",
        ),
    ],
)
def test_the_admin_form_says_one_thing_about_a_bad_context_window(
    provider: str, value: str, message: str, admin_user: object
) -> None:
    request = RequestFactory().get("/")
    request.user = admin_user
    form_class = admin.site._registry[ChatModelConfig].get_form(request)
    form = form_class(
        data={
            "slug": "s",
            "provider": provider,
            "model": "gpt-4o" if provider == "openai" else "",
            "timeout": "60",
            "max_retries": "2",
            "context_window": value,
            "options": "{}",
            "settings": "{}",
        }
    )
    assert not form.is_valid()
    assert form.errors == {"context_window": [message]}
