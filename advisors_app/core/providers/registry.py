"""Chat and embedding models built from plain configuration mappings.

One place turns a config such as ``{"provider": "openai", "model": "gpt-4o-mini",
"api_key_env": "OPENAI_API_KEY", "options": {"temperature": 0.2}}`` into a model, for settings
aliases and admin rows alike. Keys are only ever named (``api_key_env``) and read from the
environment when a request is made: a config never holds a key, and nothing here logs one.

Providers and their keys (all optional unless marked):

=========  =========  ========================================================================
provider   kind       keys
=========  =========  ========================================================================
embedded   chat       ``options``, ``timeout``, ``tool_call_emulation``, ``context_window``
                      (SmolLM2-135M; window at most and by default 4096)
embedded   embedding  none (all-MiniLM-L6-v2, 384 dimensions)
openai     chat       ``model`` (required), ``base_url``, ``api_key_env``, ``options``,
                      ``timeout``, ``max_retries``, ``include_usage``, ``tool_call_emulation``,
                      ``emulated_tool_rounds``, ``headers``, ``context_window``
openai     embedding  ``model`` (required), ``base_url``, ``api_key_env``, ``dimensions``,
                      ``send_dimensions``, ``batch_size``, ``timeout``, ``max_retries``,
                      ``headers``
scripted   chat       ``responses`` (list of answers: a text, a list of texts streamed as
                      chunks, or ``{"error": <message>}``: that call fails with a
                      ``ProviderError``, status 500), ``repeat`` (default true),
                      ``chunk_delay`` (seconds slept before each streamed chunk, default
                      0), ``options``, ``tool_rules``
                      (list of ``{"when": <regex>, "tool": <name>, "arguments"?: {...}}``:
                      call that tool when the last user message matches and the tool is
                      offered), ``after_tool`` (answer to a tool response, with
                      ``{tool_result}``), ``context_window``; see :mod:`.scripted`
=========  =========  ========================================================================

``api_key_env`` defaults to ``"OPENAI_API_KEY"`` when no ``base_url`` is given (OpenAI
itself) and to none otherwise (local servers need no key); set it to ``None`` for no key.
The variable must be one a provider key may live in (:mod:`.key_envs`: ``…_API_KEY``,
``…_KEY`` or ``…_TOKEN`` and none of the server's own secrets, or the process's allowlist).
``model`` may be given for the embedded providers but must then name the embedded model.
``context_window`` (every chat provider) is the tokens one request holds, prompt and answer:
a positive int, or ``None``/absent for the provider's figure (embedded: 4096; others:
unknown, prompts not checked); the built model exposes it as ``context_window`` and the model
advisors check every prompt against it (:mod:`advisors_app.core.context_window`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any

from ..exceptions import ProviderError
from ..model import ChatModel, EmbeddingModel
from ..prompt import ChatOptions
from .key_envs import key_env_problem

__all__ = [
    "BUILTIN_CHAT_MODELS",
    "BUILTIN_EMBEDDING_MODELS",
    "CHAT_PROVIDERS",
    "EMBEDDING_PROVIDERS",
    "api_key_env_of",
    "create_chat_model",
    "create_embedding_model",
    "default_chat_model",
    "default_embedding_model",
    "missing_api_key_env",
    "validate_model_config",
]

EMBEDDED_CHAT_MODEL = "smollm2-135m-instruct"
EMBEDDED_EMBEDDING_MODEL = "all-minilm-l6-v2"
#: The embedded chat model's context window (``embedded_smollm2.CONTEXT_WINDOW``; not imported
#: from there, which would load the provider to validate a config).
EMBEDDED_CONTEXT_WINDOW = 4096

#: Aliases that always exist: the offline defaults.
BUILTIN_CHAT_MODELS: dict[str, dict[str, Any]] = {EMBEDDED_CHAT_MODEL: {"provider": "embedded"}}
BUILTIN_EMBEDDING_MODELS: dict[str, dict[str, Any]] = {
    EMBEDDED_EMBEDDING_MODEL: {"provider": "embedded"}
}

_CONNECTION = {"model", "base_url", "api_key_env", "timeout", "max_retries", "headers"}
_KEYS: dict[tuple[str, str], set[str]] = {
    ("chat", "embedded"): {"model", "options", "timeout", "tool_call_emulation", "context_window"},
    ("chat", "openai"): _CONNECTION
    | {"options", "include_usage", "tool_call_emulation", "emulated_tool_rounds", "context_window"},
    ("chat", "scripted"): {
        "context_window",
        "model",
        "options",
        "responses",
        "repeat",
        "chunk_delay",
        "tool_rules",
        "after_tool",
    },
    ("embedding", "embedded"): {"model"},
    ("embedding", "openai"): _CONNECTION | {"dimensions", "send_dimensions", "batch_size"},
}
CHAT_PROVIDERS = tuple(p for kind, p in _KEYS if kind == "chat")
EMBEDDING_PROVIDERS = tuple(p for kind, p in _KEYS if kind == "embedding")

_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "base_url": (str,),
    "api_key_env": (str, type(None)),
    "timeout": (int, float, type(None)),
    "max_retries": (int,),
    "headers": (dict,),
    "options": (dict,),
    "include_usage": (bool,),
    "tool_call_emulation": (bool,),
    "emulated_tool_rounds": (int, type(None)),
    "responses": (list,),
    "repeat": (bool,),
    "chunk_delay": (int, float),
    "tool_rules": (list,),
    "after_tool": (str,),
    "dimensions": (int,),
    "send_dimensions": (bool,),
    "batch_size": (int,),
    "context_window": (int, type(None)),
}


def validate_model_config(config: Mapping[str, Any], kind: str, name: str = "") -> None:
    """Raise ``ValueError`` naming the model, key, bad value and fix if ``config`` is invalid.

    ``kind`` is ``"chat"`` or ``"embedding"``; ``name`` (an alias) only improves messages.
    Builds nothing and reads no environment variable.
    """
    label = f"{kind} model {name!r}" if name else f"{kind} model config"
    if not isinstance(config, Mapping):
        raise ValueError(f"{label} must be a mapping, not {type(config).__name__}")
    provider = config.get("provider")
    providers = CHAT_PROVIDERS if kind == "chat" else EMBEDDING_PROVIDERS
    if provider not in providers:
        raise ValueError(f"{label} has provider {provider!r}; use one of: {', '.join(providers)}")
    allowed = _KEYS[(kind, provider)]
    unknown = sorted(set(config) - allowed - {"provider"})
    if unknown:
        raise ValueError(
            f"{label} (provider {provider!r}) has unknown key(s) {', '.join(unknown)}; "
            f"allowed: {', '.join(sorted(allowed))}"
        )
    for key, value in config.items():
        expected = _TYPES.get(key)
        # bool is an int: True must not pass as a number.
        if expected and (not isinstance(value, expected) or _is_bool_for_number(value, expected)):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in expected)
            # The value's type, not the value: a misplaced header or key must not be echoed.
            got = "a bool" if isinstance(value, bool) else f"a {type(value).__name__}"
            raise ValueError(f"{label}: {key!r} must be {names}, got {got}")
    if provider == "openai" and not config.get("model"):
        raise ValueError(f"{label}: provider 'openai' needs a 'model'")
    # Here, not where the key is read: every config reaches a model through this function, so
    # a disallowed variable is refused before any request could carry its value (key_envs).
    key_env = api_key_env_of(config)
    problem = key_env_problem(key_env) if key_env else None
    if problem:
        raise ValueError(f"{label}: 'api_key_env': {problem}")
    embedded = EMBEDDED_CHAT_MODEL if kind == "chat" else EMBEDDED_EMBEDDING_MODEL
    if provider == "embedded" and config.get("model", embedded) != embedded:
        raise ValueError(
            f"{label}: the embedded provider only serves {embedded!r}, got {config['model']!r}"
        )
    if "options" in config:
        try:
            ChatOptions.from_dict(config["options"])
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{label}: {exc}") from exc
    if provider == "scripted" and not all(
        _is_scripted_answer(r) for r in config.get("responses", [])
    ):
        raise ValueError(
            f"{label}: 'responses' must be a list of strings (or of lists of strings: chunks, "
            'or {"error": <message>}: a failing call)'
        )
    if provider == "scripted" and ("tool_rules" in config or "after_tool" in config):
        from .scripted import check_after_tool, parse_tool_rules

        try:
            parse_tool_rules(config.get("tool_rules", []))
            if "after_tool" in config:
                check_after_tool(config["after_tool"])
        except ValueError as exc:
            raise ValueError(f"{label}: {exc}") from exc
    if config.get("chunk_delay", 0) < 0:
        raise ValueError(f"{label}: 'chunk_delay' must be >= 0, got {config['chunk_delay']!r}")
    numbers = ("timeout", "batch_size", "dimensions", "context_window")
    for key in numbers:
        if config.get(key) is not None and config[key] <= 0:
            raise ValueError(f"{label}: {key!r} must be positive, got {config[key]!r}")
    window = config.get("context_window")
    if provider == "embedded" and window is not None and window > EMBEDDED_CONTEXT_WINDOW:
        raise ValueError(
            f"{label}: 'context_window' of the embedded model is at most "
            f"{EMBEDDED_CONTEXT_WINDOW} (one llama.cpp slot), got {window!r}"
        )
    if config.get("max_retries", 0) < 0:
        raise ValueError(f"{label}: 'max_retries' must be >= 0, got {config['max_retries']!r}")


def _is_scripted_answer(value: Any) -> bool:
    if isinstance(value, dict):
        return set(value) == {"error"} and isinstance(value["error"], str)
    if isinstance(value, list):
        return all(isinstance(chunk, str) for chunk in value)
    return isinstance(value, str)


def _scripted_item(item: Any) -> Any:
    """A scripted answer as the model takes it: ``{"error": m}`` becomes the failure raised."""
    if isinstance(item, dict):
        return ProviderError(item["error"], status=500, provider="scripted")
    return item


def _is_bool_for_number(value: Any, expected: tuple[type, ...]) -> bool:
    return isinstance(value, bool) and bool not in expected


def api_key_env_of(config: Mapping[str, Any]) -> str | None:
    """The environment variable holding the key of an ``openai`` config, or ``None``."""
    if config.get("provider") != "openai":
        return None
    if "api_key_env" in config:
        value = config["api_key_env"]
        return str(value) if value else None
    return None if config.get("base_url") else "OPENAI_API_KEY"


def missing_api_key_env(
    config: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> str | None:
    """The name of the key variable ``config`` needs when it is unset or empty, else ``None``."""
    name = api_key_env_of(config)
    env = os.environ if environ is None else environ
    return name if name and not env.get(name) else None


def _connection(config: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("base_url", "timeout", "max_retries", "headers")
    settings = {key: config[key] for key in keys if key in config}
    settings["api_key_env"] = api_key_env_of(config)
    return settings


def create_chat_model(config: Mapping[str, Any], *, name: str = "") -> ChatModel:
    """A new ``ChatModel`` for ``config``; raises ``ValueError`` (see
    :func:`validate_model_config`). Embedded models share the process-wide llama.cpp server."""
    validate_model_config(config, "chat", name)
    provider = config["provider"]
    options = ChatOptions.from_dict(config["options"]) if "options" in config else None
    if provider == "embedded":
        from .embedded_smollm2 import SmolLm2ChatModel

        embedded: dict[str, Any] = {"default_options": options}
        for key in ("timeout", "tool_call_emulation", "context_window"):
            if key in config:
                embedded[key] = config[key]
        return SmolLm2ChatModel(**embedded)
    if provider == "scripted":
        from .scripted import ScriptedChatModel, parse_tool_rules

        return ScriptedChatModel(
            [_scripted_item(item) for item in config.get("responses", [])],
            default_options=options,
            chunk_delay=float(config.get("chunk_delay", 0)),
            repeat=config.get("repeat", True),
            tool_rules=parse_tool_rules(config.get("tool_rules", [])),
            after_tool=config.get("after_tool"),
            context_window=config.get("context_window"),
        )
    from .openai_compatible import OpenAiCompatibleChatModel

    flags = ("include_usage", "tool_call_emulation", "emulated_tool_rounds", "context_window")
    extra = {k: config[k] for k in flags if k in config}
    return OpenAiCompatibleChatModel(
        model=config["model"], default_options=options, **_connection(config), **extra
    )


def create_embedding_model(config: Mapping[str, Any], *, name: str = "") -> EmbeddingModel:
    """A new ``EmbeddingModel`` for ``config``; raises ``ValueError`` (see
    :func:`validate_model_config`)."""
    validate_model_config(config, "embedding", name)
    if config["provider"] == "embedded":
        from .embedded_minilm import MiniLmEmbeddingModel

        return MiniLmEmbeddingModel()
    from .openai_embedding import OpenAiCompatibleEmbeddingModel

    extra = {k: config[k] for k in ("dimensions", "send_dimensions", "batch_size") if k in config}
    return OpenAiCompatibleEmbeddingModel(model=config["model"], **_connection(config), **extra)


_defaults: dict[str, Any] = {}
_defaults_lock = threading.Lock()


def _shared(kind: str, config: Mapping[str, Any]) -> Any:
    model = _defaults.get(kind)
    if model is None:
        with _defaults_lock:
            model = _defaults.get(kind)
            if model is None:
                build = create_chat_model if kind == "chat" else create_embedding_model
                model = _defaults[kind] = build(config)
    return model


def default_chat_model() -> ChatModel:
    """The offline default chat model (SmolLM2-135M-Instruct), one per process.

    Building it is cheap; the llama.cpp server starts on the first call (~0.5 s).
    """
    return _shared("chat", BUILTIN_CHAT_MODELS[EMBEDDED_CHAT_MODEL])  # type: ignore[no-any-return]


def default_embedding_model() -> EmbeddingModel:
    """The offline default embedding model (all-MiniLM-L6-v2, 384 dimensions), one per process."""
    return _shared("embedding", BUILTIN_EMBEDDING_MODELS[EMBEDDED_EMBEDDING_MODEL])  # type: ignore[no-any-return]
