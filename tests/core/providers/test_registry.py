"""Models built from plain configuration mappings; keys only ever named, read at request time."""

from __future__ import annotations

import pytest

from advisors_app.core import ChatModel, EmbeddingModel, Prompt, ScriptedChatModel
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.core.providers.embedded_smollm2 import SmolLm2ChatModel
from advisors_app.core.providers.openai_compatible import (
    OpenAiCompatibleChatModel,
    OpenAiCompatibleEmbeddingModel,
)
from advisors_app.core.providers.registry import (
    api_key_env_of,
    create_chat_model,
    create_embedding_model,
    default_chat_model,
    default_embedding_model,
    missing_api_key_env,
    validate_model_config,
)
from tests.core.providers.openai_server import Completion, ScriptedOpenAiServer


def test_the_defaults_are_the_embedded_models_shared_per_process() -> None:
    chat, embedding = default_chat_model(), default_embedding_model()
    assert isinstance(chat, SmolLm2ChatModel) and chat is default_chat_model()
    assert isinstance(embedding, MiniLmEmbeddingModel) and embedding is default_embedding_model()
    assert embedding.dimensions == 384


def test_embedded_configs() -> None:
    chat = create_chat_model(
        {"provider": "embedded", "options": {"temperature": 0.7}, "tool_call_emulation": False}
    )
    assert isinstance(chat, SmolLm2ChatModel) and not chat.tool_call_emulation
    assert (chat.default_options.temperature, chat.default_options.max_tokens) == (0.7, 512)
    assert isinstance(create_embedding_model({"provider": "embedded"}), MiniLmEmbeddingModel)


async def test_a_scripted_config_repeats_its_answers() -> None:
    model = create_chat_model({"provider": "scripted", "responses": ["one", "two"]})
    assert isinstance(model, ScriptedChatModel)
    answers = [(await model.call(Prompt("x"))).text for _ in range(3)]
    assert answers == ["one", "two", "one"]


async def test_a_scripted_config_streams_chunk_lists_with_a_delay() -> None:
    config = {"provider": "scripted", "responses": [["Hel", "lo"]], "chunk_delay": 0.01}
    model = create_chat_model(config)
    assert isinstance(model, ScriptedChatModel) and model.chunk_delay == 0.01
    assert [c.text async for c in model.stream(Prompt("x"))] == ["Hel", "lo"]
    assert (await model.call(Prompt("x"))).text == "Hello"


async def test_an_openai_config_reads_its_key_from_the_named_variable(
    openai_server: ScriptedOpenAiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ADVISORS_TEST_KEY", "sk-registry")
    config = {
        "provider": "openai",
        "model": "scripted-model",
        "base_url": openai_server.base_url,
        "api_key_env": "ADVISORS_TEST_KEY",
        "options": {"temperature": 0.1},
        "timeout": 5,
        "max_retries": 0,
    }
    model = create_chat_model(config, name="hosted")
    assert isinstance(model, OpenAiCompatibleChatModel) and isinstance(model, ChatModel)
    openai_server.add(Completion("hi"))
    assert (await model.call(Prompt("x"))).text == "hi"
    request = openai_server.requests[0]
    assert request.headers["authorization"] == "Bearer sk-registry"
    assert request.body["temperature"] == 0.1
    assert "sk-registry" not in repr(model) and "sk-registry" not in repr(config)


def test_an_openai_embedding_config() -> None:
    model = create_embedding_model(
        {
            "provider": "openai",
            "model": "nomic",
            "base_url": "http://127.0.0.1:9/v1",
            "dimensions": 768,
        }
    )
    assert isinstance(model, OpenAiCompatibleEmbeddingModel) and isinstance(model, EmbeddingModel)
    assert model.dimensions == 768


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"provider": "openai", "model": "gpt-4o-mini"}, "OPENAI_API_KEY"),
        ({"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1"}, None),
        ({"provider": "openai", "model": "m", "api_key_env": "GROQ_API_KEY"}, "GROQ_API_KEY"),
        ({"provider": "openai", "model": "m", "api_key_env": None}, None),
        ({"provider": "embedded"}, None),
    ],
)
def test_which_variable_holds_the_key(config: dict, expected: str | None) -> None:
    assert api_key_env_of(config) == expected
    assert missing_api_key_env(config, environ={}) == expected
    assert missing_api_key_env(config, environ={expected or "X": "set"}) is None


def test_a_value_of_the_wrong_type_is_named_by_its_type_never_echoed() -> None:
    secret = ["Authorization: Bearer tok-0123456789abcdef"]
    with pytest.raises(ValueError) as raised:
        validate_model_config({"provider": "openai", "model": "m", "headers": secret}, "chat", "a")
    assert "'headers' must be dict" in str(raised.value) and "got a list" in str(raised.value)
    assert "tok-0123456789abcdef" not in str(raised.value)


@pytest.mark.parametrize(
    ("kind", "config", "fragment"),
    [
        ("chat", ["openai"], "must be a mapping, not list"),
        ("chat", {"provider": "anthropic"}, "provider 'anthropic'; use one of: embedded, openai"),
        ("embedding", {"provider": "scripted"}, "use one of: embedded, openai"),
        ("chat", {"provider": "openai"}, "provider 'openai' needs a 'model'"),
        ("chat", {"provider": "openai", "model": "m", "api_key": "sk-x"}, "unknown key(s) api_key"),
        ("chat", {"provider": "embedded", "base_url": "http://x"}, "unknown key(s) base_url"),
        ("chat", {"provider": "embedded", "model": "llama3"}, "only serves 'smollm2-135m"),
        ("chat", {"provider": "openai", "model": "m", "timeout": "5"}, "'timeout' must be int"),
        ("chat", {"provider": "openai", "model": "m", "timeout": 0}, "'timeout' must be positive"),
        ("chat", {"provider": "openai", "model": "m", "max_retries": True}, "must be int"),
        ("chat", {"provider": "openai", "model": "m", "max_retries": -1}, "must be >= 0"),
        ("chat", {"provider": "embedded", "options": {"temprature": 1}}, "unknown chat option"),
        ("chat", {"provider": "scripted", "responses": [1]}, "list of strings"),
        ("chat", {"provider": "scripted", "responses": [["a", 2]]}, "list of strings"),
        ("chat", {"provider": "scripted", "chunk_delay": -1}, "'chunk_delay' must be >= 0"),
        ("embedding", {"provider": "openai", "model": "m", "dimensions": 0}, "must be positive"),
    ],
)
def test_invalid_configs_name_the_problem(kind: str, config: object, fragment: str) -> None:
    with pytest.raises(ValueError) as raised:
        validate_model_config(config, kind, "alias1")  # type: ignore[arg-type]
    assert fragment in str(raised.value) and f"{kind} model 'alias1'" in str(raised.value)
    build = create_chat_model if kind == "chat" else create_embedding_model
    with pytest.raises(ValueError):
        build(config)  # type: ignore[arg-type]


# --- context_window (issue 20) -------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "window"),
    [
        ({"provider": "embedded"}, 4096),
        ({"provider": "embedded", "context_window": 2048}, 2048),
        ({"provider": "embedded", "context_window": None}, 4096),
        ({"provider": "openai", "model": "m", "api_key_env": None}, None),
        (
            {"provider": "openai", "model": "m", "api_key_env": None, "context_window": 128000},
            128000,
        ),
        ({"provider": "scripted"}, None),
        ({"provider": "scripted", "context_window": 64}, 64),
    ],
)
def test_chat_models_expose_their_context_window(config, window) -> None:
    model = create_chat_model(config)
    assert model.context_window == window  # type: ignore[attr-defined]
    with pytest.raises(AttributeError):
        model.context_window = 1  # type: ignore[attr-defined,misc]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"provider": "scripted", "context_window": 0}, "'context_window' must be positive, got 0"),
        ({"provider": "scripted", "context_window": -1}, "must be positive"),
        ({"provider": "scripted", "context_window": "4k"}, "'context_window' must be int or null"),
        ({"provider": "scripted", "context_window": True}, "'context_window' must be int or null"),
        ({"provider": "scripted", "context_window": 1.5}, "'context_window' must be int or null"),
        ({"provider": "embedded", "context_window": 8192}, "at most 4096"),
    ],
)
def test_registry_refuses_a_bad_context_window(config, message) -> None:
    with pytest.raises(ValueError, match=message):
        validate_model_config(config, "chat", "small")


def test_embedding_models_have_no_context_window() -> None:
    with pytest.raises(ValueError, match="unknown key"):
        validate_model_config({"provider": "embedded", "context_window": 512}, "embedding")


def test_the_registry_knows_the_embedded_window_without_loading_the_provider() -> None:
    from advisors_app.core.providers import embedded_smollm2, registry

    assert registry.EMBEDDED_CONTEXT_WINDOW == embedded_smollm2.CONTEXT_WINDOW == 4096
