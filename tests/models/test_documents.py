"""Document models: content hash on save, HNSW index helpers for vector and halfvec (B24)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from django.db import connection

from advisors_app.models import Collection, Document
from advisors_app.models.documents import cosine_distance, embedding_index
from tests.testapp.models import WideItem

pytestmark = pytest.mark.django_db


def test_save_fills_the_content_hash():
    collection = Collection.objects.create(slug="c", name="C")
    row = Document.objects.create(collection=collection, content="hello", embedding=[0.1] * 384)
    assert row.content_hash == hashlib.sha256(b"hello").hexdigest()
    assert len(row.id) == 36 and str(row).endswith("hello")


def test_b24_over_2000_dimensions_is_indexed_as_halfvec_and_queries_use_it():
    rng = np.random.default_rng(3)
    WideItem.objects.bulk_create(
        WideItem(embedding=rng.standard_normal(3072).tolist()) for _ in range(30)
    )
    probe = rng.standard_normal(3072).tolist()
    queryset = (
        WideItem.objects.annotate(distance=cosine_distance("embedding", 3072, probe))
        .order_by("distance")
        .values_list("pk", "distance")[:3]
    )
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            plan = queryset.explain()
            found = list(queryset)
        finally:
            cursor.execute("RESET enable_seqscan")
    assert "testapp_wide_hnsw" in plan
    distances = [d for _, d in found]
    assert distances == sorted(distances) and len(found) == 3


def test_index_helper_limits():
    assert embedding_index("a", 384).opclasses == ["vector_cosine_ops"]
    assert embedding_index("b", 4000).expressions
    with pytest.raises(ValueError, match=r"cannot index 4096-dimensional embeddings"):
        embedding_index("c", 4096)
