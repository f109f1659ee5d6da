"""Semantic cache contract and its in-memory implementation (Spring AI ``SemanticCache``).

A semantic cache answers a query with a response stored for a *similar* earlier query of the
same *scope*. The scope is an opaque string (the ``SemanticCacheAdvisor`` hashes the system
prompt, model, options, tools, owner and earlier messages into it): entries of another scope
are never returned. Similarity is **cosine similarity** (1 − cosine distance) in [0, 1]; a
query matches when the best entry reaches ``similarity_threshold`` (default 0.8, Spring AI's
default; note that Spring's Redis cache converts distances as ``1 − d/2``, which is looser).
Entries expire ``ttl`` seconds after they are written (``None``: never).

Divergences from Spring AI ``DefaultSemanticCache``: the scope filter applies always, so an
entry written under a system prompt is never served to a request without one (defect 5.7.50);
a response without generations is not stored rather than failing after the model call.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .messages import AssistantMessage
from .model import EmbeddingModel
from .response import (
    ChatGenerationMetadata,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    Usage,
)

__all__ = [
    "DEFAULT_SIMILARITY_THRESHOLD",
    "CacheHit",
    "InMemorySemanticCache",
    "MemoizedEmbeddings",
    "SemanticCache",
    "response_from_data",
    "response_to_data",
]

DEFAULT_SIMILARITY_THRESHOLD = 0.8


@dataclass(frozen=True, slots=True)
class CacheHit:
    """A cached answer: the stored ``response``, the ``query`` it was stored for, and the
    cosine ``similarity`` between that query and the one asked."""

    response: ChatResponse
    query: str
    similarity: float


@runtime_checkable
class SemanticCache(Protocol):
    """Stores responses by query text within a scope; all methods are ``async``."""

    async def get(self, query: str, scope: str) -> CacheHit | None: ...

    async def set(self, query: str, response: ChatResponse, scope: str) -> None: ...

    async def clear(self, scope: str | None = None) -> None: ...


def response_to_data(response: ChatResponse) -> dict[str, Any]:
    """The JSON-ready part of a response worth caching: generations' text and finish reason."""
    return {
        "model": response.metadata.model,
        "generations": [
            {"text": g.output.text, "finish_reason": g.metadata.finish_reason}
            for g in response.generations
        ],
    }


def response_from_data(data: Mapping[str, Any], **extra: Any) -> ChatResponse:
    """Rebuild a cached response; ``extra`` goes into its metadata. Usage is zero (no tokens)."""
    return ChatResponse(
        tuple(
            Generation(AssistantMessage(g["text"]), ChatGenerationMetadata(g.get("finish_reason")))
            for g in data.get("generations", ())
        ),
        ChatResponseMetadata(model=data.get("model", ""), usage=Usage(0, 0, 0), extra=extra),
    )


class MemoizedEmbeddings:
    """An ``EmbeddingModel`` that remembers the last ``size`` texts it embedded (LRU).

    A cache miss embeds the query for ``get`` and again for ``set``; tool indexes embed the
    same tool descriptions for every session. Thread-safe.
    """

    def __init__(self, model: EmbeddingModel, size: int = 4096) -> None:
        if model is None:
            raise ValueError("embeddingModel cannot be null")
        self.model = model
        self.size = size
        self._memo: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def dimensions(self) -> int:
        return self.model.dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            known = {t: self._memo[t] for t in texts if t in self._memo}
            for text in known:
                self._memo.move_to_end(text)
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            fresh = dict(zip(missing, await self.model.embed(missing), strict=True))
            known.update(fresh)
            with self._lock:
                self._memo.update(fresh)
                while len(self._memo) > self.size:
                    self._memo.popitem(last=False)
        return [known[t] for t in texts]


def check_settings(similarity_threshold: float, ttl: float | None) -> None:
    """Raise ``ValueError`` for a threshold outside [0, 1] or a ``ttl`` that is not positive."""
    if not 0.0 <= similarity_threshold <= 1.0:
        raise ValueError(
            f"similarity_threshold must be a similarity in [0, 1], got {similarity_threshold}"
        )
    if ttl is not None and ttl <= 0:
        raise ValueError(f"ttl must be positive seconds or None, got {ttl}")


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


@dataclass(slots=True)
class _Entry:
    query: str
    vector: list[float]
    data: dict[str, Any]
    expires_at: float | None


class InMemorySemanticCache:
    """A :class:`SemanticCache` in process memory (for the core, tests and single processes).

    ``embedding_model`` embeds queries; ``similarity_threshold`` and ``ttl`` (seconds) as in
    the module docstring; ``max_entries`` bounds the cache (oldest writes go first); ``clock``
    returns seconds. Setting a query whose best match in the scope reaches the threshold
    replaces that entry (as Spring AI does) instead of adding a near-duplicate.
    """

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        *,
        similarity_threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
        ttl: float | None = None,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        check_settings(similarity_threshold, ttl)
        self.embeddings = MemoizedEmbeddings(embedding_model, 256)
        self.similarity_threshold = similarity_threshold
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._scopes: dict[str, list[_Entry]] = {}
        self._order: deque[tuple[str, _Entry]] = deque()
        self._lock = threading.Lock()

    def _best(self, scope: str, vector: list[float], now: float) -> tuple[_Entry | None, float]:
        best: _Entry | None = None
        best_similarity = -1.0
        for entry in self._scopes.get(scope, ()):
            if entry.expires_at is not None and entry.expires_at <= now:
                continue
            similarity = _cosine(vector, entry.vector)
            if similarity > best_similarity:
                best, best_similarity = entry, similarity
        if best is None or best_similarity < self.similarity_threshold:
            return None, best_similarity
        return best, best_similarity

    async def get(self, query: str, scope: str) -> CacheHit | None:
        (vector,) = await self.embeddings.embed([query])
        with self._lock:
            entry, similarity = self._best(scope, vector, self._clock())
        if entry is None:
            return None
        return CacheHit(response_from_data(entry.data), entry.query, min(similarity, 1.0))

    async def set(self, query: str, response: ChatResponse, scope: str) -> None:
        if not response.generations:
            return
        (vector,) = await self.embeddings.embed([query])
        now = self._clock()
        expires_at = now + self.ttl if self.ttl is not None else None
        data = response_to_data(response)
        with self._lock:
            entries = self._scopes.setdefault(scope, [])
            entries[:] = [e for e in entries if e.expires_at is None or e.expires_at > now]
            existing, _ = self._best(scope, vector, now)
            if existing is not None:
                existing.query, existing.vector = query, vector
                existing.data, existing.expires_at = data, expires_at
                return
            entry = _Entry(query, vector, data, expires_at)
            entries.append(entry)
            self._order.append((scope, entry))
            while len(self._order) > self.max_entries:
                old_scope, old = self._order.popleft()
                scoped = self._scopes.get(old_scope, [])
                scoped[:] = [e for e in scoped if e is not old]

    async def clear(self, scope: str | None = None) -> None:
        with self._lock:
            if scope is None:
                self._scopes.clear()
                self._order.clear()
            else:
                self._scopes.pop(scope, None)
                self._order = deque((s, e) for s, e in self._order if s != scope)
