"""Model protocols (Spring AI ``ChatModel``, ``StreamingChatModel``, ``EmbeddingModel``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Protocol, runtime_checkable

from .prompt import ChatOptions, Prompt
from .response import ChatResponse

__all__ = ["ChatModel", "EmbeddingModel"]


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: one async ``call`` and a ``stream`` of partial responses.

    ``stream(prompt)`` returns an async iterator of chunks (each a :class:`ChatResponse` with the
    text delta, tool-call deltas, and usage when the provider sends it). Closing the iterator
    early (``aclose()``) must cancel the upstream request. Errors are
    :class:`~advisors_app.core.exceptions.ProviderError` subclasses, raised the same way by
    ``call`` and while iterating ``stream``.
    """

    @property
    def default_options(self) -> ChatOptions | None: ...

    async def call(self, prompt: Prompt) -> ChatResponse: ...

    def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]: ...


@runtime_checkable
class EmbeddingModel(Protocol):
    """An embedding model: ``embed(texts)`` returns one vector per text, in input order.

    Each vector has ``dimensions`` floats. Models used for cosine search should return
    unit-norm vectors.
    """

    @property
    def dimensions(self) -> int: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]: ...
