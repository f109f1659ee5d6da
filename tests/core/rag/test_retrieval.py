"""VectorStoreDocumentRetriever: defaults, validation, filters from objects, text, suppliers
and the query context (B19), a context filter ANDed with the configured one (issue 18)."""

from __future__ import annotations

import contextvars

import pytest

from advisors_app.core import AdvisorStateError
from advisors_app.core.rag import FILTER_EXPRESSION, Query, VectorStoreDocumentRetriever
from advisors_app.core.vectorstore import And, Document, Eq, Gte, SimpleVectorStore
from tests.embeddings import WordEmbeddingModel
from tests.retrieval import CountingStore

TENANT = contextvars.ContextVar("tenant", default="t1")


@pytest.fixture
async def store():
    inner = SimpleVectorStore(WordEmbeddingModel())
    await inner.aadd(
        [
            Document("report", {"tenant": "t1", "year": 2021, "genre": "x"}, id="t1-2021"),
            Document("report", {"tenant": "t1", "year": 2019, "genre": "x"}, id="t1-2019"),
            Document("report", {"tenant": "t2", "year": 2022, "genre": "x"}, id="t2-2022"),
            Document("report", {"genre": "drama"}, id="drama"),
        ]
    )
    return CountingStore(inner)


async def test_defaults_follow_spring(store):
    await VectorStoreDocumentRetriever(store).retrieve(Query("report"))
    search = store.searches[0]
    assert (search.query, search.top_k, search.similarity_threshold) == ("report", 4, 0.0)
    assert search.filter_expression is None


@pytest.mark.parametrize(
    ("per_call", "expected"),
    [
        (And(Eq("tenant", "t1"), Gte("year", 2020)), {"t1-2021"}),
        ("tenant == 't1' && year >= 2020", {"t1-2021"}),
        ("", {"t1-2021", "t1-2019", "t2-2022"}),
        (None, {"t1-2021", "t1-2019", "t2-2022"}),
    ],
)
async def test_b19_context_filter_narrows_the_default(store, per_call, expected):
    retriever = VectorStoreDocumentRetriever(store, top_k=10, filter_expression="genre == 'x'")
    context = {} if per_call is None else {FILTER_EXPRESSION: per_call}
    found = await retriever.retrieve(Query("report", context=context))
    assert {d.id for d in found} == expected


@pytest.mark.parametrize(
    ("configured", "per_call", "expected"),
    [
        # Issue 18: the caller's "t1 or t2" cannot widen the configured "t1".
        ("tenant == 't1'", "tenant == 't1' || tenant == 't2'", {"t1-2021", "t1-2019"}),
        # B19's scenario: Spring replaced "drama" by the per-call filter; ANDed, nothing is both.
        ("genre == 'drama'", "tenant == 't1' && year >= 2020", set()),
        (lambda: Eq("tenant", TENANT.get()), "tenant == 't2'", set()),
        (None, "tenant == 't2'", {"t2-2022"}),
    ],
)
async def test_a_context_filter_is_anded_with_the_configured_one(
    store, configured, per_call, expected
):
    retriever = VectorStoreDocumentRetriever(store, top_k=10, filter_expression=configured)
    found = await retriever.retrieve(Query("report", context={FILTER_EXPRESSION: per_call}))
    assert {d.id for d in found} == expected


async def test_allow_request_filter_false_ignores_the_context_filter(store):
    retriever = VectorStoreDocumentRetriever(
        store, top_k=10, filter_expression="tenant == 't1'", allow_request_filter=False
    )
    query = Query("report", context={FILTER_EXPRESSION: "tenant == 't2' || year > 0"})
    assert retriever.request_filter(query) == Eq("tenant", "t1")
    assert {d.id for d in await retriever.retrieve(query)} == {"t1-2021", "t1-2019"}


async def test_b19_invalid_context_filter_names_the_parameter(store):
    retriever = VectorStoreDocumentRetriever(store)
    with pytest.raises(ValueError, match=r"^vector_store_filter_expression: Invalid filter"):
        await retriever.retrieve(Query("report", context={FILTER_EXPRESSION: "tenant =="}))


async def test_a_filter_supplier_runs_on_every_retrieval_and_sees_contextvars(store):
    retriever = VectorStoreDocumentRetriever(
        store, top_k=10, filter_expression=lambda: Eq("tenant", TENANT.get())
    )
    assert {d.id for d in await retriever.retrieve(Query("report"))} == {"t1-2021", "t1-2019"}
    TENANT.set("t2")
    assert {d.id for d in await retriever.retrieve(Query("report"))} == {"t2-2022"}


def test_validation_messages(store):
    with pytest.raises(AdvisorStateError, match=r"vectorStore cannot be null"):
        VectorStoreDocumentRetriever(None)
    with pytest.raises(ValueError, match=r"topK must be greater than 0"):
        VectorStoreDocumentRetriever(store, top_k=0)
    with pytest.raises(ValueError, match=r"similarityThreshold must be equal to or greater than"):
        VectorStoreDocumentRetriever(store, similarity_threshold=-0.1)
    with pytest.raises(ValueError, match=r"Invalid filter"):
        VectorStoreDocumentRetriever(store, filter_expression="a ==")
