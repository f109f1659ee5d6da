"""Semantic-cache entries: answers stored by the embedding of the question they answered."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone
from pgvector.django import HnswIndex, VectorField

__all__ = ["SEMANTIC_CACHE_DIMENSIONS", "SemanticCacheEntry"]

#: Length of every stored query embedding (all-MiniLM-L6-v2, the default embedding model).
SEMANTIC_CACHE_DIMENSIONS = 384


class SemanticCacheEntry(models.Model):
    """One cached answer of ``PgVectorSemanticCache`` (``advisors_app.stores.semantic_cache``).

    ``scope`` is the 64-character hash that confines lookups (owner, system prompt, model,
    options, tools, history); ``embedding`` is the query's unit vector (384 floats), searched by
    cosine distance through an HNSW index; ``response`` holds the answer's generations as JSON;
    ``expires_at`` is ``None`` for entries that never expire.
    """

    scope = models.CharField(max_length=64)
    query = models.TextField()
    embedding = VectorField(dimensions=SEMANTIC_CACHE_DIMENSIONS)
    response = models.JSONField(encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    hit_count = models.PositiveIntegerField(default=0)
    last_hit_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "semantic cache entry"
        verbose_name_plural = "semantic cache entries"
        indexes = [
            HnswIndex(
                name="advisors_semcache_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
            models.Index(fields=["scope", "expires_at"], name="advisors_semcache_scope"),
        ]

    def __str__(self) -> str:
        return self.query[:80]
