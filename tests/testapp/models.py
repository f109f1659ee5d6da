"""Test-only models."""

from __future__ import annotations

from django.db import models
from pgvector.django import VectorField


class Item(models.Model):
    """A named 3-dimensional vector, for pgvector queries through the ORM."""

    name = models.CharField(max_length=50)
    embedding = VectorField(dimensions=3)
