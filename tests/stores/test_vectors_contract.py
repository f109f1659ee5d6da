"""The VectorStore contract, run against every backend: SimpleVectorStore and PgVectorStore.

Scores and thresholds (B25), filters as objects and text with the same results on both stores
(B19), injection attempts, deletes, replacement by id, dimension mismatches (B24), sync twins.
"""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core.vectorstore import (
    DISTANCE,
    SCORE,
    Document,
    EmbeddingDimensionError,
    Eq,
    SearchRequest,
    SimpleVectorStore,
    parse_filter,
)
from tests.embeddings import WordEmbeddingModel, at_cosine_distance, unit

BACKENDS = ["simple", pytest.param("pgvector", marks=pytest.mark.django_db(transaction=True))]


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def make_store(backend):
    def make(model):
        if backend == "simple":
            return SimpleVectorStore(model)
        from advisors_app.models import Collection
        from advisors_app.stores.vectors import PgVectorStore

        collection, _ = Collection.objects.get_or_create(slug="contract", defaults={"name": "C"})
        return PgVectorStore(collection, model)

    return make


@pytest.fixture
def model():
    return WordEmbeddingModel(
        {
            "query": unit(1.0),
            "same": at_cosine_distance(0.02),
            "far": at_cosine_distance(0.85),
            "mid": at_cosine_distance(0.4),
        }
    )


async def test_b25_scores_are_similarities_and_the_threshold_is_a_similarity(make_store, model):
    store = await sync_to_async(make_store)(model)
    await store.aadd([Document("far", id="d_far"), Document("same", id="d_same")])
    found = await store.asimilarity_search(
        SearchRequest("query", top_k=5, similarity_threshold=0.7)
    )
    assert [d.id for d in found] == ["d_same"]
    assert found[0].score == pytest.approx(0.98, abs=1e-4)
    assert found[0].metadata[SCORE] == pytest.approx(0.98, abs=1e-4)
    assert found[0].metadata[DISTANCE] == pytest.approx(0.02, abs=1e-4)
    both = await store.asimilarity_search(SearchRequest("query", top_k=5))
    assert [d.id for d in both] == ["d_same", "d_far"]
    assert [round(d.score, 3) for d in both] == [0.98, 0.15]
    assert [round(d.metadata[DISTANCE], 3) for d in both] == [0.02, 0.85]


async def test_top_k_and_order(make_store, model):
    store = await sync_to_async(make_store)(model)
    await store.aadd([Document(t, id=t) for t in ("mid", "far", "same")])
    assert [d.id for d in await store.asimilarity_search(SearchRequest("query", top_k=2))] == [
        "same",
        "mid",
    ]
    assert [d.id for d in await store.asimilarity_search("query")] == ["same", "mid", "far"]


async def test_results_keep_text_and_metadata(make_store, model):
    store = await sync_to_async(make_store)(model)
    await store.aadd([Document("same", {"source": "a.md", "n": 1, "tags": ["x"]}, id="s")])
    [found] = await store.asimilarity_search("query")
    assert (found.id, found.text) == ("s", "same")
    assert {k: found.metadata[k] for k in ("source", "n", "tags")} == {
        "source": "a.md",
        "n": 1,
        "tags": ["x"],
    }


METADATA = {
    "d1": {"genre": "drama", "year": 2021, "price": 9.5, "open": True, "tags": "a"},
    "d2": {"genre": "comedy", "year": 2019, "price": 12, "open": False},
    "d3": {"genre": "Drama", "year": "2021"},
    "d4": {"year": 2020.0, "price": None},
    "d5": {},
    "d6": {"genre": "élan", "year": 2022},
}

FILTERS = [
    "genre == 'drama'",
    "year == 2021",
    "year == 2020",
    "year >= 2020",
    "year > 2020 && year < 2022",
    "year != 2021",
    "genre nin ['drama', 'comedy']",
    "genre in ['drama', 'Drama']",
    "price <= 10",
    "open == true",
    "open != true",
    "genre > 'd'",
    "genre < 'e'",
    "genre >= 'z'",
    "price is null",
    "price is not null",
    "NOT (year >= 2020)",
    "genre == 'drama' || year == 2020",
    "NOT genre == 'drama' && year >= 2019",
    "tags == 'a'",
    "missing != 'x'",
    "year == '2021'",
]


@pytest.mark.parametrize("text", FILTERS)
async def test_filters_select_the_same_rows_in_every_store(make_store, text):
    store = await sync_to_async(make_store)(WordEmbeddingModel())
    await store.aadd([Document(f"text {i}", m, id=i) for i, m in METADATA.items()])
    expression = parse_filter(text)
    expected = {i for i, m in METADATA.items() if expression.matches(m)}
    for given in (text, expression):
        found = await store.asimilarity_search(
            SearchRequest("text", top_k=10, filter_expression=given)
        )
        assert {d.id for d in found} == expected, text


@pytest.mark.parametrize(
    "value",
    [
        "x' OR '1'='1",
        "x'); DROP TABLE advisors_app_document; --",
        '" OR 1=1 --',
        "\\' OR metadata IS NOT NULL --",
    ],
)
async def test_injection_attempts_are_plain_values(make_store, value):
    store = await sync_to_async(make_store)(WordEmbeddingModel())
    await store.aadd([Document("a", {"tenant": "t1"}, id="a"), Document("b", {"tenant": value})])
    found = await store.asimilarity_search(
        SearchRequest("a", top_k=10, filter_expression=Eq("tenant", "nobody"))
    )
    assert found == []
    hit = await store.asimilarity_search(
        SearchRequest("a", top_k=10, filter_expression=Eq("tenant", value))
    )
    assert [d.metadata["tenant"] for d in hit] == [value]
    with pytest.raises(ValueError, match="Invalid filter expression"):
        SearchRequest("a", filter_expression="tenant == 't1' OR 1=1")


async def test_delete_by_ids_and_by_filter(make_store):
    store = await sync_to_async(make_store)(WordEmbeddingModel())
    await store.aadd([Document(f"doc {i}", {"n": i}, id=f"d{i}") for i in range(5)])
    await store.adelete(["d0", "unknown"])
    await store.adelete(Eq("n", 1))
    await store.adelete("n >= 3")
    assert {d.id for d in await store.asimilarity_search(SearchRequest("doc", top_k=10))} == {"d2"}
    with pytest.raises(ValueError, match="delete filter cannot be null or empty"):
        await store.adelete("  ")
    with pytest.raises(ValueError, match="Invalid filter"):
        await store.adelete("n ==")


async def test_adding_an_existing_id_replaces_it(make_store, model):
    store = await sync_to_async(make_store)(model)
    await store.aadd([Document("far", {"v": 1}, id="x")])
    await store.aadd([Document("same", {"v": 2}, id="x")])
    [found] = await store.asimilarity_search("query")
    assert (found.text, found.metadata["v"]) == ("same", 2)


async def test_b24_a_vector_of_another_dimension_is_refused(make_store):
    class Liar(WordEmbeddingModel):
        async def embed(self, texts):
            return [[0.1] * 1024 for _ in texts]

        def embed_sync(self, texts):
            return [[0.1] * 1024 for _ in texts]

    store = await sync_to_async(make_store)(Liar())
    with pytest.raises(
        EmbeddingDimensionError, match=r"1024 dimensions .* 384-dimensional"
    ) as info:
        await store.aadd([Document("x")])
    assert (info.value.actual, info.value.expected) == (1024, 384)
    with pytest.raises(EmbeddingDimensionError):
        await store.asimilarity_search("x")


def test_sync_twins(make_store, model):
    store = make_store(model)
    store.add([Document("same", id="s"), Document("far", id="f")])
    assert [d.id for d in store.similarity_search("query")] == ["s", "f"]
    store.delete(["f"])
    assert [d.id for d in store.similarity_search(SearchRequest("query", top_k=1))] == ["s"]


async def test_invalid_input(make_store):
    store = await sync_to_async(make_store)(WordEmbeddingModel())
    with pytest.raises(ValueError, match="expected Document objects"):
        await store.aadd(["text"])
    with pytest.raises(ValueError, match="documents cannot be null"):
        await store.aadd(None)
    with pytest.raises(ValueError, match="expected a SearchRequest or query text"):
        await store.asimilarity_search(42)
    await store.aadd([])
    assert await store.asimilarity_search("nothing") == []
