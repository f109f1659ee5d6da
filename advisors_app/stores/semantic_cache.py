"""``PgVectorSemanticCache``: the ``SemanticCache`` contract on PostgreSQL + pgvector (Django ORM).

Entries are :class:`~advisors_app.models.SemanticCacheEntry` rows. A lookup is ``ORDER BY
embedding <=> query LIMIT 1`` restricted to the scope and to unexpired rows, through the HNSW
cosine index with ``hnsw.iterative_scan = strict_order`` (pgvector ≥ 0.8) so that the scope
filter cannot starve the index scan; if the index scan finds nothing, the search is repeated
exactly (no index). ``similarity = 1 − cosine distance``; a hit needs ``similarity ≥
similarity_threshold``. Each hit bumps the row's ``hit_count``. Writing a query whose best match
in the scope reaches the threshold replaces that row; expired rows of the scope are deleted on
write, and :meth:`PgVectorSemanticCache.purge_expired` deletes all of them.

The ORM work is synchronous and runs through :func:`~advisors_app.db.threads.db_sync_to_async`,
never on the event loop. Two concurrent misses for one question may both write a row; lookups
then return either.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Q
from pgvector.django import CosineDistance

from advisors_app.core.cache import (
    DEFAULT_SIMILARITY_THRESHOLD,
    CacheHit,
    MemoizedEmbeddings,
    check_settings,
    response_from_data,
    response_to_data,
)
from advisors_app.core.model import EmbeddingModel
from advisors_app.core.response import ChatResponse
from advisors_app.db.threads import db_sync_to_async
from advisors_app.models.cache import SEMANTIC_CACHE_DIMENSIONS, SemanticCacheEntry

__all__ = ["PgVectorSemanticCache"]


class PgVectorSemanticCache:
    """A ``SemanticCache`` stored in PostgreSQL; shared by every process on the database.

    ``embedding_model`` must return 384-dimensional vectors (the column's size; anything else
    raises ``ValueError`` naming both sizes); ``similarity_threshold`` is a cosine similarity
    in [0, 1] (default 0.8); ``ttl`` is in seconds (``None``: entries never expire); ``clock``
    returns POSIX seconds (tests move it).
    """

    def __init__(
        self,
        embedding_model: EmbeddingModel,
        *,
        similarity_threshold: float = DEFAULT_SIMILARITY_THRESHOLD,
        ttl: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        check_settings(similarity_threshold, ttl)
        self.embeddings = MemoizedEmbeddings(embedding_model, 256)
        self.similarity_threshold = similarity_threshold
        self.ttl = ttl
        self._clock = clock

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self._clock(), tz=UTC)

    async def _vector(self, query: str) -> list[float]:
        (vector,) = await self.embeddings.embed([query])
        if len(vector) != SEMANTIC_CACHE_DIMENSIONS:
            raise ValueError(
                f"the embedding model returned {len(vector)} dimensions but the semantic cache "
                f"column holds {SEMANTIC_CACHE_DIMENSIONS}; use a {SEMANTIC_CACHE_DIMENSIONS}"
                "-dimensional model such as all-MiniLM-L6-v2"
            )
        return vector

    def _nearest(self, scope: str, vector: list[float], now: datetime) -> tuple[Any, float] | None:
        rows = (
            SemanticCacheEntry.objects.filter(scope=scope)
            .filter(Q(expires_at__isnull=True) | Q(expires_at__gt=now))
            .annotate(distance=CosineDistance("embedding", vector))
            .order_by("distance", "pk")
        )
        for exact in (False, True):
            with transaction.atomic(), connection.cursor() as cursor:
                # SET LOCAL through set_config: bound parameters, reset at the end of the block.
                cursor.execute(
                    "SELECT set_config('hnsw.iterative_scan', 'strict_order', true), "
                    "set_config('enable_indexscan', %s, true)",
                    ["off" if exact else "on"],
                )
                found = rows.values_list("pk", "distance").first()
            if found is not None:
                return found[0], 1.0 - found[1]
        return None

    def _get(self, query: str, scope: str, vector: list[float]) -> CacheHit | None:
        now = self._now()
        nearest = self._nearest(scope, vector, now)
        if nearest is None or nearest[1] < self.similarity_threshold:
            return None
        pk, similarity = nearest
        SemanticCacheEntry.objects.filter(pk=pk).update(
            hit_count=F("hit_count") + 1, last_hit_at=now
        )
        row = SemanticCacheEntry.objects.filter(pk=pk).values_list("query", "response").first()
        if row is None:  # deleted in between
            return None
        return CacheHit(response_from_data(row[1]), row[0], min(similarity, 1.0))

    def _set(self, query: str, data: dict[str, Any], scope: str, vector: list[float]) -> None:
        now = self._now()
        expires_at = now + timedelta(seconds=self.ttl) if self.ttl is not None else None
        with transaction.atomic():
            SemanticCacheEntry.objects.filter(scope=scope, expires_at__lte=now).delete()
            nearest = self._nearest(scope, vector, now)
            values = {
                "query": query,
                "embedding": vector,
                "response": data,
                "created_at": now,
                "expires_at": expires_at,
            }
            if nearest is not None and nearest[1] >= self.similarity_threshold:
                SemanticCacheEntry.objects.filter(pk=nearest[0]).update(**values)
            else:
                SemanticCacheEntry.objects.create(scope=scope, **values)

    async def get(self, query: str, scope: str) -> CacheHit | None:
        vector = await self._vector(query)
        return await db_sync_to_async(self._get)(query, scope, vector)

    async def set(self, query: str, response: ChatResponse, scope: str) -> None:
        if not response.generations:
            return
        vector = await self._vector(query)
        await db_sync_to_async(self._set)(query, response_to_data(response), scope, vector)

    async def clear(self, scope: str | None = None) -> None:
        rows = SemanticCacheEntry.objects.all()
        if scope is not None:
            rows = rows.filter(scope=scope)
        await rows.adelete()

    def purge_expired(self) -> int:
        """Delete every expired entry (all scopes); returns how many were deleted."""
        deleted, _ = SemanticCacheEntry.objects.filter(expires_at__lte=self._now()).delete()
        return deleted
