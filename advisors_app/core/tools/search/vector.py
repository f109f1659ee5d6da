"""``VectorToolIndex``: semantic tool search over an ``EmbeddingModel`` (Spring AI
``VectorToolIndex``).

Each tool is embedded once as ``"<name>: <description>"`` (Spring embeds the description only;
the name carries meaning too). A query returns the tools whose **cosine similarity** to it is at
least ``similarity_threshold`` (default 0.2, as Spring AI), best first, ties in indexing order.
Vectors are kept in process memory per session; embeddings are memoised by text, so sessions
that share tools embed them once. ``category_filter`` is ignored, as in Spring AI.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...cache import MemoizedEmbeddings
from ...model import EmbeddingModel
from .index import (
    DEFAULT_MAX_RESULTS,
    SessionStore,
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    limit_of,
)

__all__ = ["VectorToolIndex"]


@dataclass(frozen=True, slots=True)
class _Session:
    tools: tuple[ToolReference, ...]
    matrix: Any  # (len(tools), dimensions) float32, rows L2-normalised


def _normalised(vectors: list[list[float]]) -> Any:
    matrix = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.clip(norms, 1e-12, None)


class VectorToolIndex:
    """A ``ToolIndex`` ranking by cosine similarity of embeddings.

    ``embedding_model`` is any core ``EmbeddingModel`` (the offline default is
    ``MiniLmEmbeddingModel``); ``max_results`` defaults to 10; ``similarity_threshold`` is a
    cosine similarity in [0, 1]; ``memo_size`` bounds the text-to-vector memo.
    """

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        *,
        max_results: int = DEFAULT_MAX_RESULTS,
        similarity_threshold: float = 0.2,
        memo_size: int = 4096,
    ) -> None:
        if not 0.0 <= similarity_threshold <= 1.0:
            raise ValueError(
                f"similarity_threshold must be a similarity in [0, 1], got {similarity_threshold}"
            )
        self.embedding_model = embedding_model
        self.max_results = max_results
        self.similarity_threshold = similarity_threshold
        self._embeddings = MemoizedEmbeddings(embedding_model, memo_size)
        self._store: SessionStore[_Session] = SessionStore()

    async def index_tools(self, session_id: str, tools: Sequence[ToolReference]) -> None:
        current = self._store.get(session_id)
        by_name = {r.name: r for r in (current.tools if current else ())}
        by_name.update((r.name, r) for r in tools)
        if not by_name:
            self._store.pop(session_id)
            return
        ordered = tuple(by_name.values())
        vectors = await self._embeddings.embed([f"{r.name}: {r.summary}" for r in ordered])
        self._store.put(session_id, _Session(ordered, _normalised(vectors)))

    async def clear_index(self, session_id: str) -> None:
        self._store.pop(session_id)

    async def search(self, request: ToolSearchRequest) -> ToolSearchResponse:
        session = self._store.get(request.session_id) if request.session_id else None
        if session is None or not (request.query or "").strip():
            return ToolSearchResponse()
        (query,) = await self._embeddings.embed([request.query])
        similarities = session.matrix @ _normalised([query])[0]
        ranked = sorted(
            (i for i in range(len(session.tools)) if similarities[i] >= self.similarity_threshold),
            key=lambda i: -float(similarities[i]),
        )
        limit = limit_of(request, self.max_results)
        return ToolSearchResponse(tuple(session.tools[i] for i in ranked[:limit]), len(ranked))
