"""Test-only models."""

from __future__ import annotations

from django.db import models
from pgvector.django import VectorField

from advisors_app.models.documents import embedding_index


class Item(models.Model):
    """A named 3-dimensional vector, for pgvector queries through the ORM."""

    name = models.CharField(max_length=50)
    embedding = VectorField(dimensions=3)


class WideItem(models.Model):
    """A 3072-dimensional vector: beyond HNSW's 2000 for ``vector``, indexed as ``halfvec``."""

    embedding = VectorField(dimensions=3072)

    class Meta:
        indexes = [embedding_index("testapp_wide_hnsw", 3072)]
