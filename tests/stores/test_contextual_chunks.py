"""Contextual chunks and reindexing (issue 41): each chunk's context line is stored apart from
its text, embedded and indexed with it, and ``reindex`` rebuilds both indexes."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from advisors_app.core.vectorstore import Document, SearchRequest
from advisors_app.ingestion.pipeline import default_context, ingest_documents, ingest_text
from advisors_app.ingestion.reindex import reindex_collection
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.stores.vectors import PgVectorStore
from tests.embeddings import WordEmbeddingModel

pytestmark = pytest.mark.django_db

TEXT = "Refunds take five working days after the parcel arrives."


@pytest.fixture
def collection() -> Collection:
    return Collection.objects.create(slug="handbook", name="Handbook")


def test_the_context_line_is_stored_apart_embedded_and_indexed(collection) -> None:
    model = WordEmbeddingModel()
    ingest_text(
        collection,
        "policies.md",
        TEXT,
        metadata={"title": "Shipping handbook", "section": "Returns"},
        embedding_model=model,
    )

    [row] = DocumentRow.objects.filter(collection=collection)
    assert row.content == TEXT
    assert row.context == "Shipping handbook › Returns"
    assert model.calls == [[f"Shipping handbook › Returns\n\n{TEXT}"]]
    assert list(row.embedding) == pytest.approx(model.vector(model.calls[0][0]), abs=1e-6)

    store = PgVectorStore(collection, model)
    [found] = store.similarity_search(SearchRequest("handbook", search_mode="lexical"))
    assert found.text == TEXT  # what users see: the text alone


def test_a_new_context_line_counts_as_a_change(collection) -> None:
    model = WordEmbeddingModel()
    first = ingest_documents(
        collection, "a.md", [Document(TEXT, {"title": "Old"})], embedding_model=model
    )
    again = ingest_documents(
        collection, "a.md", [Document(TEXT, {"title": "Old"})], embedding_model=model
    )
    renamed = ingest_documents(
        collection, "a.md", [Document(TEXT, {"title": "New"})], embedding_model=model
    )
    assert (first.added, again.added, renamed.added) == (1, 0, 1)
    assert list(DocumentRow.objects.values_list("context", flat=True)) == ["New"]


def test_no_contextualizer_means_no_context(collection) -> None:
    model = WordEmbeddingModel()
    ingest_text(collection, "a.txt", TEXT, embedding_model=model, contextualizer=None)
    assert DocumentRow.objects.get().context == ""
    assert model.calls == [[TEXT]]


def test_the_default_context_is_title_then_heading_path() -> None:
    chunk = Document("x", {"source": "a.md", "headings": ["Guide", "Setup", "Setup"]})
    assert default_context(chunk) == "a.md › Guide › Setup"
    assert default_context(Document("x", {"source": "a.md", "title": "A"})) == "A"


def test_reindex_rebuilds_the_lexical_index_after_a_configuration_change(collection) -> None:
    model = WordEmbeddingModel()
    ingest_text(collection, "de.txt", "Die Häuser am Fluss sind alt.", embedding_model=model)
    collection.text_search_config = "german"
    collection.save()
    store = PgVectorStore(collection, model)
    request = SearchRequest("Haus", search_mode="lexical")
    assert store.similarity_search(request) == []  # indexed in English

    call_command("reindex", "handbook", "--lexical", stdout=io.StringIO())

    assert [d.text for d in store.similarity_search(request)] == ["Die Häuser am Fluss sind alt."]


def test_reindex_recomputes_context_lines_and_embeddings(collection) -> None:
    model = WordEmbeddingModel()
    ingest_text(collection, "a.txt", TEXT, embedding_model=model, contextualizer=None)
    DocumentRow.objects.update(metadata={"source": "a.txt", "title": "Returns"})

    result = reindex_collection(collection, embedding_model=model, contextualizer=default_context)

    assert (result.chunks, result.contexts_changed, result.embedded) == (1, 1, 1)
    row = DocumentRow.objects.get()
    assert row.context == "Returns"
    assert list(row.embedding) == pytest.approx(model.vector(f"Returns\n\n{TEXT}"), abs=1e-6)


def test_reindex_names_an_unknown_collection() -> None:
    with pytest.raises(ValueError, match="nope"):
        reindex_collection("nope", lexical_only=True)
