"""The ingestion service: idempotent per source, stale chunks removed, owners kept apart,
a mismatched embedding model refused before anything is stored (B24)."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from advisors_app.core.ingestion import TokenTextSplitter
from advisors_app.core.vectorstore import EmbeddingDimensionError, SearchRequest
from advisors_app.ingestion.pipeline import ingest_bytes, ingest_text
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.stores.vectors import PgVectorStore
from tests.embeddings import WordEmbeddingModel

pytestmark = pytest.mark.django_db

PARAGRAPHS = [f"Paragraph {i} is about subject {i} and nothing else at all." for i in range(12)]
SPLITTER = TokenTextSplitter(chunk_size=16, chunk_overlap=0, min_chunk_chars=10)


@pytest.fixture
def collection():
    return Collection.objects.create(slug="kb", name="KB")


def ingest(collection, text, **options):
    options.setdefault("embedding_model", WordEmbeddingModel())
    return ingest_text(collection, "notes.txt", text, splitter=SPLITTER, **options)


def test_re_ingesting_is_idempotent_and_updates_only_what_changed(collection):
    model = WordEmbeddingModel()
    progress = []
    first = ingest(
        collection,
        "\n\n".join(PARAGRAPHS),
        metadata={"lang": "en"},
        embedding_model=model,
        progress=lambda done, total: progress.append((done, total)),
        batch_size=5,
    )
    assert (first.added, first.unchanged, first.removed) == (12, 0, 0)
    assert progress == [(0, 12), (5, 12), (10, 12), (12, 12)]
    assert str(first) == "notes.txt: 12 chunks (12 added, 0 unchanged, 0 removed)"
    again = ingest(collection, "\n\n".join(PARAGRAPHS), embedding_model=model)
    assert (again.added, again.unchanged, again.removed) == (0, 12, 0)
    assert sum(len(batch) for batch in model.calls) == 12
    changed = [*PARAGRAPHS[:-1], "A brand new closing paragraph about other things."]
    third = ingest(collection, "\n\n".join(changed), embedding_model=model)
    assert (third.added, third.unchanged, third.removed) == (1, 11, 1)
    rows = DocumentRow.objects.filter(collection=collection)
    assert rows.count() == 12
    row = rows.get(content=PARAGRAPHS[0])
    assert row.source == "notes.txt"
    assert row.metadata == {"lang": "en", "source": "notes.txt", "chunk_index": 0}


def test_owned_uploads_stay_private_and_do_not_collide(collection):
    User = get_user_model()
    alice, bob = User.objects.create_user("alice"), User.objects.create_user("bob")
    ingest(collection, "Alice's secret plan.", owner=alice)
    result = ingest(collection, "Alice's secret plan.", owner=bob)
    assert result.added == 1
    ingest(collection, "Public handbook.")
    as_bob = PgVectorStore.for_user(collection, bob, WordEmbeddingModel())
    found = as_bob.similarity_search(SearchRequest("plan handbook", top_k=10))
    assert sorted(DocumentRow.objects.get(pk=d.id).owner_id or 0 for d in found) == [0, bob.pk]


def test_b24_mismatched_model_is_refused_before_storing(collection):
    with pytest.raises(EmbeddingDimensionError, match=r"1024 dimensions"):
        ingest(collection, "text", embedding_model=WordEmbeddingModel(dimensions=1024))
    assert not DocumentRow.objects.exists()


def test_bad_input(collection):
    with pytest.raises(ValueError, match=r"no collection with slug 'missing'"):
        ingest_text("missing", "a.txt", "x", embedding_model=WordEmbeddingModel())
    with pytest.raises(ValueError, match=r"source .* cannot be empty"):
        ingest_text(collection, " ", "x", embedding_model=WordEmbeddingModel())
    with pytest.raises(ValueError, match=r"supported types"):
        ingest_bytes(collection, "a.exe", b"MZ", embedding_model=WordEmbeddingModel())
