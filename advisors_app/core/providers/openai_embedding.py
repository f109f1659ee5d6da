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
    one vector per text, in input order. ``dimensions`` is the vector length: required, except
    for OpenAI's models whose length is known; every answer is checked against it (a mismatch
    raises :class:`MalformedResponseError`). ``send_dimensions=True`` also sends it as the
    API's ``dimensions`` option, which asks models such as ``text-embedding-3-*`` for shortened
    vectors (Spring AI always sends it; many self-hosted servers reject it, hence opt-in).
    Connection settings and errors as
    :class:`~advisors_app.core.providers.openai_compatible.OpenAiCompatibleChatModel`.
    Raises ``ValueError`` at construction for a bad or missing setting.
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
        send_dimensions: bool = False,
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
        dimensions = dimensions or self.KNOWN_DIMENSIONS.get(model)
        if dimensions is None or dimensions < 1:
            raise ValueError(
                f"dimensions of embedding model {model!r} must be given as a positive number "
                f"(the length of its vectors), got {dimensions!r}"
            )
        self.model = model
        self.batch_size = batch_size
        self.send_dimensions = send_dimensions
        self._dimensions = dimensions
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
        """The length of every vector."""
        return self._dimensions

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
        if self.send_dimensions:
            request["dimensions"] = self._dimensions
        provider = self._settings.provider
        try:
            answer = await (await self._settings.client()).embeddings.create(**request)
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
        if lengths != {self._dimensions}:
            raise MalformedResponseError(
                f"the provider returned vectors of {sorted(lengths)} dimensions, "
                f"expected {self._dimensions}",
                provider=provider,
            )
        return vectors
