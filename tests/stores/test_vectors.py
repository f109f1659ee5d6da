"""PgVectorStore specifics: owner/tenant scope that callers cannot widen, de-duplication,
B24 at construction, filtered HNSW searches that still fill top_k, the index in use."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import connection
from pgvector.django import CosineDistance

from advisors_app.core.vectorstore import (
    Document,
    EmbeddingDimensionError,
    Eq,
    IsNotNull,
    Or,
    SearchRequest,
)
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.stores.vectors import PgVectorStore
from tests.embeddings import WordEmbeddingModel

pytestmark = pytest.mark.django_db


@pytest.fixture
def users():
    User = get_user_model()
    return User.objects.create_user("alice"), User.objects.create_user("bob")


@pytest.fixture
def shared():
    return Collection.objects.create(slug="shared", name="Shared")


def ids(documents):
    return sorted(d.id for d in documents)


def test_users_see_shared_and_their_own_rows_only(users, shared):
    alice, bob = users
    model = WordEmbeddingModel()
    PgVectorStore(shared, model).add([Document("public note", {"owner": "x"}, id="pub")])
    PgVectorStore.for_user(shared, alice, model).add([Document("alice note", id="a")])
    PgVectorStore.for_user(shared, bob, model).add([Document("bob note", {"owner": "bob"}, id="b")])
    assert DocumentRow.objects.get(pk="a").owner == alice
    as_alice = PgVectorStore.for_user(shared, alice, model)
    wide = Or(Eq("owner", "bob"), IsNotNull("owner"))
    assert ids(as_alice.similarity_search(SearchRequest("note", top_k=10))) == ["a", "pub"]
    widened = SearchRequest("note", top_k=10, filter_expression=wide)
    assert ids(as_alice.similarity_search(widened)) == ["pub"]
    text = SearchRequest("note", top_k=10, filter_expression="owner == 'bob' || owner != 'z'")
    assert ids(as_alice.similarity_search(text)) == ["a", "pub"]
    anonymous = PgVectorStore.for_user(shared, AnonymousUser(), model)
    assert ids(anonymous.similarity_search(SearchRequest("note", top_k=10))) == ["pub"]
    assert ids(PgVectorStore(shared, model).similarity_search(SearchRequest("note", top_k=10))) == [
        "a",
        "b",
        "pub",
    ]


def test_a_user_cannot_delete_or_overwrite_other_users_rows(users, shared):
    alice, bob = users
    model = WordEmbeddingModel()
    PgVectorStore.for_user(shared, bob, model).add([Document("bob note", id="b")])
    as_alice = PgVectorStore.for_user(shared, alice, model)
    as_alice.delete(["b"])
    as_alice.delete(IsNotNull("x") | Eq("x", 1) | ~Eq("x", 1))
    assert DocumentRow.objects.filter(pk="b").exists()
    with pytest.raises(PermissionDenied, match=r"outside this store's scope: b"):
        as_alice.add([Document("hijack", id="b")])
    assert DocumentRow.objects.get(pk="b").content == "bob note"


def test_private_collections_and_tenants(users):
    alice, bob = users
    model = WordEmbeddingModel()
    private = Collection.objects.create(slug="alice-only", name="A", owner=alice)
    PgVectorStore.for_user(private, alice, model)
    with pytest.raises(PermissionDenied):
        PgVectorStore.for_user(private, bob, model)
    with pytest.raises(PermissionDenied):
        PgVectorStore.for_user("alice-only", AnonymousUser(), model)
    PgVectorStore(private, model, tenant="t1").add([Document("one", id="t1")])
    PgVectorStore(private, model, tenant="t2").add([Document("two", id="t2")])
    t1 = PgVectorStore(private, model, tenant="t1")
    assert ids(t1.similarity_search(SearchRequest("one two", top_k=5))) == ["t1"]
    t1.delete(["t2"])
    assert DocumentRow.objects.filter(pk="t2", tenant="t2").exists()


def test_identical_text_from_the_same_source_is_stored_once(shared):
    store = PgVectorStore(shared, WordEmbeddingModel())
    store.add(
        [Document("same text", {"source": "a.md"}), Document("same text", {"source": "a.md"})]
    )
    store.add([Document("same text", {"source": "a.md"})])
    store.add([Document("same text", {"source": "b.md"})])
    rows = DocumentRow.objects.filter(collection=shared)
    assert sorted(rows.values_list("source", flat=True)) == ["a.md", "b.md"]
    assert rows.first().content_hash == hashlib.sha256(b"same text").hexdigest()


def test_documents_without_a_source_may_repeat_a_text(shared):
    store = PgVectorStore(shared, WordEmbeddingModel())
    store.add(
        [Document("yes", {"conversationId": "c1"}), Document("yes", {"conversationId": "c2"})]
    )
    assert DocumentRow.objects.filter(collection=shared, content="yes").count() == 2


def test_anonymous_users_cannot_add(shared):
    anonymous = PgVectorStore.for_user(shared, AnonymousUser(), WordEmbeddingModel())
    with pytest.raises(PermissionDenied, match="anonymous users cannot add documents"):
        anonymous.add([Document("spam")])


def test_b24_a_model_of_another_dimension_is_refused_at_construction(shared):
    with pytest.raises(EmbeddingDimensionError, match=r"768 dimensions but .* 384-dimensional"):
        PgVectorStore(shared, WordEmbeddingModel(dimensions=768))


def test_filtered_search_returns_top_k_when_that_many_match(shared):
    rng = np.random.default_rng(7)
    model = WordEmbeddingModel()
    store = PgVectorStore(shared, model)
    vectors = rng.standard_normal((1500, 384))
    rows = [
        DocumentRow(
            id=f"r{i}",
            collection=shared,
            content=f"row {i}",
            content_hash=f"{i:064d}",
            metadata={"rare": i % 150 == 0, "n": i},
            embedding=(v / np.linalg.norm(v)).tolist(),
        )
        for i, v in enumerate(vectors)
    ]
    DocumentRow.objects.bulk_create(rows)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE advisors_app_document")
    query = rng.standard_normal(384)
    query /= np.linalg.norm(query)
    model.table["probe"] = query.tolist()
    found = store.similarity_search(
        SearchRequest("probe", top_k=10, filter_expression=Eq("rare", True))
    )
    rare = [i for i in range(1500) if i % 150 == 0]
    exact = sorted(rare, key=lambda i: -float(vectors[i] @ query / np.linalg.norm(vectors[i])))
    assert [d.id for d in found] == [f"r{i}" for i in exact]
    unfiltered = store.similarity_search(SearchRequest("probe", top_k=10))
    assert len(unfiltered) == 10


def test_the_hnsw_index_serves_the_search_query(shared):
    store = PgVectorStore(shared, WordEmbeddingModel())
    store.add([Document(f"doc {i}", id=f"d{i}") for i in range(20)])
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        try:
            queryset = (
                DocumentRow.objects.annotate(
                    distance=CosineDistance("embedding", [1.0] + [0.0] * 383)
                )
                .order_by("distance")
                .values("pk")[:5]
            )
            plan = queryset.explain()
        finally:
            cursor.execute("RESET enable_seqscan")
    assert "advisors_document_hnsw" in plan
