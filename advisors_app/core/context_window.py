"""The budget check before every model call: does the prompt fit the model's context window?

A chat model may say how many tokens one request holds, prompt and answer together, through a
read-only ``context_window`` attribute (``int``, or ``None``: unknown). It is not part of the
:class:`~advisors_app.core.model.ChatModel` protocol (a model without it is simply not
checked); read it with :func:`context_window_of`. The three providers have it: the embedded
SmolLM2's is 4,096 (one llama.cpp slot), the others' come from their configuration.

:func:`check_context_window` runs in :class:`~advisors_app.core.chain.ChatModelCallAdvisor`
and :class:`~advisors_app.core.chain.ChatModelStreamAdvisor`, the innermost advisors every
model call goes through (every tool-loop round and every fallback model included), on the prompt
exactly as it goes out: system, history, retrieved context, the new message, format
instructions, tool definitions and a native response schema. The prompt may take
``context_window - max_tokens`` tokens, where ``max_tokens`` is the prompt's option, else the
model's default option, else :data:`DEFAULT_ANSWER_RESERVE`; beyond that it raises
:class:`~advisors_app.core.exceptions.ContextOverflowError` and the provider is not called.

It stays cheap: a prompt whose UTF-8 size (an upper bound of its token count: every token is
at least one byte) fits is not counted at all. Otherwise a model that can count its own prompt
exactly — an async ``count_prompt_tokens(prompt) -> int``, as the embedded SmolLM2 does through
its llama.cpp server, whose tokenizer reads 5-30 % more tokens than ``cl100k_base`` in prose
and twice as many in digits — is asked (:func:`acheck_context_window`, what the model advisors
use); every other model, and that one should its counter fail, is estimated with
:class:`~advisors_app.core.tokens.TiktokenTokenCountEstimator` (``cl100k_base``, texts cached,
so a long history is tokenized once per process, not once per turn). No Spring AI counterpart
(issue 20).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from .exceptions import ContextOverflowError
from .messages import AssistantMessage, Message, ToolResponseMessage
from .prompt import ChatOptions, Prompt, ToolCallingChatOptions, merge_options
from .tokens import MESSAGE_OVERHEAD_TOKENS, TiktokenTokenCountEstimator, TokenCountEstimator

__all__ = [
    "DEFAULT_ANSWER_RESERVE",
    "PROMPT_OVERHEAD_TOKENS",
    "acheck_context_window",
    "answer_reserve",
    "check_context_window",
    "context_window_of",
    "estimate_prompt_tokens",
    "validated_context_window",
]

logger = logging.getLogger(__name__)

#: Completion tokens reserved for the answer when neither the prompt's options nor the
#: model's default options set ``max_tokens``.
DEFAULT_ANSWER_RESERVE = 256

#: Tokens a chat format spends priming the reply (OpenAI's figure), once per prompt.
PROMPT_OVERHEAD_TOKENS = 3

_estimator = TiktokenTokenCountEstimator()


@lru_cache(maxsize=2048)
def _cached_count(text: str) -> int:
    return _estimator.count_text(text)


def _utf8_size(text: str) -> int:
    # isascii() is O(1) in CPython: the common case allocates nothing.
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def validated_context_window(value: Any) -> int | None:
    """``value`` when it is ``None`` or a positive int (a model's ``context_window``); else
    ``ValueError`` naming it."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise ValueError(f"context_window must be a positive int (tokens), got {value!r}")
    return value


def context_window_of(model: Any) -> int | None:
    """The model's context window in tokens, or ``None`` when it does not say."""
    window = getattr(model, "context_window", None)
    return window if isinstance(window, int) and not isinstance(window, bool) else None


def answer_reserve(model: Any, options: ChatOptions | None) -> int:
    """Tokens kept for the answer: ``options.max_tokens``, else the model's default
    ``max_tokens``, else :data:`DEFAULT_ANSWER_RESERVE`."""
    if options is not None and options.max_tokens is not None:
        return options.max_tokens
    defaults: ChatOptions | None = getattr(model, "default_options", None)
    if defaults is not None and defaults.max_tokens is not None:
        return defaults.max_tokens
    return DEFAULT_ANSWER_RESERVE


def _tool_texts(options: ChatOptions | None) -> Iterable[str]:
    """The texts a provider sends besides the messages: tool definitions, a response schema."""
    if options is None:
        return
    if isinstance(options, ToolCallingChatOptions):
        for callback in options.tool_callbacks:
            definition = getattr(callback, "definition", callback)
            schema = getattr(definition, "input_schema", None)
            yield getattr(definition, "name", "") or ""
            yield getattr(definition, "description", "") or ""
            if schema is not None:
                yield schema if isinstance(schema, str) else _schema_text(definition, schema)
    if options.response_format:
        yield json.dumps(options.response_format, sort_keys=True, separators=(",", ":"))


def _schema_text(definition: Any, schema: Any) -> str:
    text = getattr(definition, "input_schema_json", None)
    if isinstance(text, str):
        return text
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _message_texts(message: Message) -> Iterable[str]:
    yield message.text
    if isinstance(message, AssistantMessage):
        for call in message.tool_calls:
            yield call.name
            yield call.arguments
    elif isinstance(message, ToolResponseMessage):
        for response in message.responses:
            yield response.response_data


def _total(prompt: Prompt, options: ChatOptions | None, size: Callable[[str], int]) -> int:
    tokens = PROMPT_OVERHEAD_TOKENS
    for message in prompt.instructions:
        tokens += MESSAGE_OVERHEAD_TOKENS
        for text in _message_texts(message):
            if text:
                tokens += size(text)
    for text in _tool_texts(options):
        if text:
            tokens += size(text)
    return tokens


def estimate_prompt_tokens(
    prompt: Prompt,
    estimator: TokenCountEstimator | None = None,
    *,
    options: ChatOptions | None = None,
) -> int:
    """Estimated tokens of ``prompt`` as a provider receives it: every message (with
    :data:`~advisors_app.core.tokens.MESSAGE_OVERHEAD_TOKENS` each, tool calls and tool
    responses included), the tool definitions and response schema of ``options`` (default: the
    prompt's), plus :data:`PROMPT_OVERHEAD_TOKENS`. ``estimator`` defaults to ``cl100k_base``
    (counts cached per text)."""
    options = prompt.options if options is None else options
    if estimator is None:
        return _total(prompt, options, _cached_count)
    return _total(prompt, options, estimator.estimate)


def _budget(model: Any, prompt: Prompt) -> tuple[int, int, ChatOptions | None] | None:
    """``(window, reserve, options)`` when ``prompt`` may not fit ``model``, else ``None``."""
    window = context_window_of(model)
    if window is None:
        return None
    options = merge_options(getattr(model, "default_options", None), prompt.options)
    reserve = answer_reserve(model, options)
    limit = window - reserve
    if limit > 0 and _total(prompt, options, _utf8_size) <= limit:
        return None  # fits even if every byte were a token: nothing to count
    return window, reserve, options


def _refuse(model: Any, tokens: int, window: int, reserve: int) -> None:
    if tokens > window - reserve:
        model_name = getattr(model, "model", None)
        raise ContextOverflowError(
            tokens,
            window - reserve,
            window,
            reserve,
            model=model_name if isinstance(model_name, str) else None,
        )


async def acheck_context_window(model: Any, prompt: Prompt) -> None:
    """:func:`check_context_window`, counting with the model's own async
    ``count_prompt_tokens(prompt)`` when it has one (exact), else estimating. What
    ``ChatModelCallAdvisor`` and ``ChatModelStreamAdvisor`` run before each model call."""
    budget = _budget(model, prompt)
    if budget is None:
        return
    window, reserve, options = budget
    counter = getattr(model, "count_prompt_tokens", None)
    tokens = None
    if counter is not None:
        try:
            tokens = int(await counter(prompt))
        except Exception:
            logger.warning("%r could not count its prompt; estimating", model, exc_info=True)
    if tokens is None:
        tokens = estimate_prompt_tokens(prompt, options=options)
    _refuse(model, tokens, window, reserve)


def check_context_window(
    model: Any, prompt: Prompt, *, estimator: TokenCountEstimator | None = None
) -> None:
    """Raise :class:`~advisors_app.core.exceptions.ContextOverflowError` when ``prompt``
    cannot fit ``model``'s context window with room for the answer (module docstring).

    A model without a known ``context_window`` is not checked. ``prompt`` is the one sent;
    its options are merged over the model's default options, as the provider merges them
    (tools the model carries by default count too). Synchronous: it always estimates
    (``estimator``, default ``cl100k_base``; given one, the byte bound is skipped too) and
    never asks the model to count; :func:`acheck_context_window` may.
    """
    if estimator is None:
        budget = _budget(model, prompt)
        if budget is None:
            return
        window, reserve, options = budget
    else:
        known = context_window_of(model)
        if known is None:
            return
        window = known
        options = merge_options(getattr(model, "default_options", None), prompt.options)
        reserve = answer_reserve(model, options)
    _refuse(model, estimate_prompt_tokens(prompt, estimator, options=options), window, reserve)
