"""Helpers shared by the advisors that answer instead of the model or rewrite streamed text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..messages import AssistantMessage
from ..requests import ChatClientResponse
from ..response import ChatGenerationMetadata, ChatResponse, ChatResponseMetadata, Generation

__all__ = ["answer", "metadata_chunk", "replace_texts"]


def answer(
    text: str,
    context: Mapping[str, Any],
    *,
    finish_reason: str | None,
    extra: Mapping[str, Any] | None = None,
    metadata: ChatResponseMetadata | None = None,
) -> ChatClientResponse:
    """A one-generation response written by an advisor (a refusal, a canned answer).

    ``extra`` goes into the response metadata and the context; ``metadata`` (for example the
    model's, with its usage) is kept when given.
    """
    base = metadata if metadata is not None else ChatResponseMetadata()
    chat_response = ChatResponse(
        (Generation(AssistantMessage(text), ChatGenerationMetadata(finish_reason)),),
        base.with_extra(**extra) if extra else base,
    )
    merged = dict(context)
    if extra:
        merged.update(extra)
    return ChatClientResponse(chat_response, merged)


def replace_texts(response: ChatResponse, texts: Mapping[int, str]) -> ChatResponse:
    """``response`` with the text of generation ``i`` replaced by ``texts[i]`` (others kept)."""
    generations = list(response.generations)
    for index, text in texts.items():
        if index < len(generations):
            old = generations[index]
            generations[index] = Generation(old.output.mutate(text=text), old.metadata)
        else:
            while len(generations) < index:
                generations.append(Generation(AssistantMessage("")))
            generations.append(Generation(AssistantMessage(text)))
    return response.mutate(generations=tuple(generations))


def metadata_chunk(
    context: Mapping[str, Any], extra: Mapping[str, Any], usage: Any = None
) -> ChatClientResponse:
    """A stream chunk with no generations carrying ``extra`` (metadata and context) and usage."""
    return ChatClientResponse(
        ChatResponse((), ChatResponseMetadata(usage=usage, extra=extra)), {**context, **extra}
    )
