"""Embeddings from an OpenAI-compatible ``/embeddings`` API (Spring AI ``OpenAiEmbeddingModel``).

Shares connection settings and error mapping with
:class:`~advisors_app.core.providers.openai_compatible.OpenAiCompatibleChatModel`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..exceptions import MalformedResponseError
from ._openai_client import ClientSettings, map_openai_error

__all__ = ["OpenAiCompatibleEmbeddingModel"]


class OpenAiCompatibleEmbeddingModel:
    """``EmbeddingModel`` over an OpenAI-compatible ``/embeddings`` endpoint.

    Texts are sent in batches of ``batch_size`` (one request each, in order); the result has
    one vector per text, in input order. ``dimensions``, when given, is sent to the API (models
    such as ``text-embedding-3-*`` shorten their vectors to it) and checked on every answer;
    otherwise it is known for OpenAI's models or learnt from the first answer. Connection
    settings and errors as :class:`OpenAiCompatibleChatModel`.
    """

    KNOWN_DIMENSIONS = {
        "text-embedding-3-small": 1536,
        "text-embedding-3-large": 3072,
        "text-embedding-ada-002": 1536,
    }

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        dimensions: int | None = None,
        batch_size: int = 256,
        timeout: float | None = 60.0,
        max_retries: int = 2,
        provider: str = "openai",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        if not model:
            raise ValueError("model cannot be null or empty")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        if dimensions is not None and dimensions < 1:
            raise ValueError(f"dimensions must be >= 1, got {dimensions!r}")
        self.model = model
        self.batch_size = batch_size
        self._requested_dimensions = dimensions
        self._learnt_dimensions: int | None = None
        self._settings = ClientSettings(
            base_url=base_url,
            api_key=api_key,
            api_key_env=api_key_env,
            timeout=timeout,
            max_retries=max_retries,
            provider=provider,
            headers=headers,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(model={self.model!r}, base_url={self._settings.base_url!r}, "
            f"provider={self._settings.provider!r})"
        )

    @property
    def dimensions(self) -> int:
        """Vector length; raises ``ValueError`` while it is still unknown (see the class)."""
        known = (
            self._requested_dimensions
            or self.KNOWN_DIMENSIONS.get(self.model)
            or self._learnt_dimensions
        )
        if known is None:
            raise ValueError(
                f"the dimensions of embedding model {self.model!r} are unknown until its first "
                "answer; pass dimensions=..."
            )
        return known

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in input order; ``[]`` for no texts."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single string")
        texts = list(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(await self._embed_batch(texts[start : start + self.batch_size]))
        return vectors

    async def _embed_batch(self, batch: list[str]) -> list[list[float]]:
        request: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": "float"}
        if self._requested_dimensions is not None:
            request["dimensions"] = self._requested_dimensions
        provider = self._settings.provider
        try:
            answer = await self._settings.client().embeddings.create(**request)
        except Exception as exc:
            mapped = map_openai_error(exc, provider)
            if mapped is exc:
                raise
            raise mapped from exc
        data = getattr(answer, "data", None)
        if not isinstance(data, list) or len(data) != len(batch):
            raise MalformedResponseError(
                f"the provider returned {len(data) if isinstance(data, list) else 'no'} "
                f"embeddings for {len(batch)} texts",
                body=str(answer)[:2000],
                provider=provider,
            )
        vectors = [list(map(float, item.embedding)) for item in sorted(data, key=lambda d: d.index)]
        lengths = {len(v) for v in vectors}
        expected = self._requested_dimensions or self.KNOWN_DIMENSIONS.get(self.model)
        if len(lengths) != 1 or (expected is not None and lengths != {expected}):
            raise MalformedResponseError(
                f"the provider returned vectors of {sorted(lengths)} dimensions, "
                f"expected {expected or 'one length'}",
                provider=provider,
            )
        self._learnt_dimensions = lengths.pop()
        return vectors
