"""Model configurations name the key's environment variable and never hold the key."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from advisors_app.models import ChatModelConfig, EmbeddingModelConfig

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("value", ["sk-proj-abc123", "MY KEY", "1KEY"])
def test_the_key_field_takes_a_variable_name_not_a_key(value: str) -> None:
    config = ChatModelConfig(slug="gpt", provider="openai", api_key_env=value)
    with pytest.raises(ValidationError) as caught:
        config.full_clean()
    assert "NAME of an environment variable" in caught.value.message_dict["api_key_env"][0]


def test_an_openai_config_needs_an_endpoint_or_a_key_variable() -> None:
    with pytest.raises(ValidationError, match="base URL or an API key variable"):
        ChatModelConfig(slug="gpt", provider="openai").full_clean()
    ChatModelConfig(slug="gpt", provider="openai", api_key_env="OPENAI_API_KEY").full_clean()


def test_key_presence_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    config = ChatModelConfig(slug="gpt", provider="openai", api_key_env="ADVISORS_TEST_KEY")
    monkeypatch.delenv("ADVISORS_TEST_KEY", raising=False)
    assert config.key_present is False
    monkeypatch.setenv("ADVISORS_TEST_KEY", "secret")
    assert config.key_present is True
    assert "secret" not in str(config.to_config())
    assert ChatModelConfig(slug="local").key_present is None


def test_to_config_is_the_provider_registry_mapping() -> None:
    config = EmbeddingModelConfig(
        slug="e",
        provider="openai",
        model="text-embedding-3-small",
        api_key_env="K",
        dimensions=1536,
    )
    assert config.to_config() == {
        "provider": "openai",
        "model": "text-embedding-3-small",
        "base_url": None,
        "api_key_env": "K",
        "options": {},
        "timeout": 60.0,
        "max_retries": 2,
        "dimensions": 1536,
    }
