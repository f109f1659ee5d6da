"""``SimpleVectorStore``: an in-memory vector store with exact cosine search (numpy).

Spring AI ``SimpleVectorStore``. For tests, demos and small corpora: every search compares the
query with every stored vector (exact, no index). Safe to share between threads and tasks.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from ..mappings import merged
from ..model import EmbeddingModel
from .base import (
    EmbeddingDimensionError,
    VectorStore,
    as_search_request,
    check_documents,
    split_delete_target,
)
from .document import DISTANCE, SCORE, Document
from .filters import Filter
from .search import SearchRequest

__all__ = ["SimpleVectorStore"]


class SimpleVectorStore(VectorStore):
    """In-memory ``VectorStore`` over an ``EmbeddingModel``; filters are evaluated in Python.

    ``score`` is the cosine similarity (``1 - cosine distance``), computed exactly over all
    documents that pass the filter. Embedding vectors must all have the model's
    ``dimensions``; a mismatch raises :class:`EmbeddingDimensionError` naming both sizes.
    ``scope_filter`` is a server-side filter ANDed into every search and delete (callers
    cannot widen it).
    """

    __slots__ = ("_documents", "_lock", "_matrix", "_vectors", "embedding_model", "scope_filter")

    def __init__(
        self, embedding_model: EmbeddingModel, *, scope_filter: Filter | None = None
    ) -> None:
        if embedding_model is None:
            raise ValueError("embeddingModel cannot be null")
        self.embedding_model = embedding_model
        self.scope_filter = scope_filter
        self._lock = threading.Lock()
        self._documents: dict[str, Document] = {}
        self._vectors: dict[str, np.ndarray] = {}
        self._matrix: tuple[list[str], np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._documents)

    def _in_scope(self, document: Document) -> bool:
        return self.scope_filter is None or self.scope_filter.matches(document.metadata)

    def _as_vector(self, values: Sequence[float]) -> np.ndarray:
        vector = np.asarray(values, dtype=np.float64)
        expected = self.embedding_model.dimensions
        if vector.ndim != 1 or vector.shape[0] != expected:
            raise EmbeddingDimensionError(vector.shape[-1] if vector.ndim else 0, expected)
        norm = np.linalg.norm(vector)
        return vector / norm if norm else vector

    async def aadd(self, documents: Sequence[Document]) -> None:
        listed = check_documents(documents)
        if not listed:
            return
        embeddings = await self.embedding_model.embed([d.text for d in listed])
        if len(embeddings) != len(listed):
            raise ValueError(
                f"the embedding model returned {len(embeddings)} vectors for {len(listed)} texts"
            )
        vectors = [self._as_vector(e) for e in embeddings]
        with self._lock:
            for document, vector in zip(listed, vectors, strict=True):
                stored = document.mutate(score=None)
                self._documents[document.id] = stored
                self._vectors[document.id] = vector
            self._matrix = None

    async def adelete(self, ids_or_filter: Sequence[str] | Filter | str) -> None:
        ids, expression = split_delete_target(ids_or_filter)
        with self._lock:
            if ids is None:
                assert expression is not None
                ids = [i for i, d in self._documents.items() if expression.matches(d.metadata)]
            for doc_id in ids:
                document = self._documents.get(doc_id)
                if document is not None and self._in_scope(document):
                    del self._documents[doc_id]
                    del self._vectors[doc_id]
            self._matrix = None

    def _snapshot(self) -> tuple[list[str], np.ndarray]:
        with self._lock:
            if self._matrix is None:
                ids = list(self._vectors)
                dims = self.embedding_model.dimensions
                matrix = np.vstack([self._vectors[i] for i in ids]) if ids else np.empty((0, dims))
                self._matrix = (ids, matrix)
            return self._matrix

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        search = as_search_request(request)
        [embedding] = await self.embedding_model.embed([search.query])
        query = self._as_vector(embedding)
        ids, matrix = self._snapshot()
        if not ids:
            return []
        similarities = matrix @ query
        expression = search.filter_expression
        results: list[Document] = []
        for index in np.argsort(-similarities, kind="stable"):
            score = float(similarities[index])
            # 0.0 accepts everything, opposite vectors (negative similarity) included.
            if search.similarity_threshold > 0.0 and score < search.similarity_threshold:
                break
            document = self._documents.get(ids[index])
            if document is None or not self._in_scope(document):
                continue
            if expression is not None and not expression.matches(document.metadata):
                continue
            results.append(
                document.mutate(
                    score=score,
                    metadata=merged(document.metadata, {SCORE: score, DISTANCE: 1.0 - score}),
                )
            )
            if len(results) == search.top_k:
                break
        return results
