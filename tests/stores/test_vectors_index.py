"""PgVectorStore's filtered search (issue 23): the plan the store's own query gets — the
metadata index for a filter keeping few rows, HNSW otherwise — top_k rows, exact search
labelled exact, and ``ef_search`` per collection and request.

The plans are taken of the very statement the store runs, inside its transaction (so with its
``SET LOCAL`` settings), through ``connection.execute_wrapper``: ``EXPLAIN (ANALYZE)`` of the same
SQL and parameters just before it runs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from pgvector.django import CosineDistance

from advisors_app.core.vectorstore import And, Eq, Gt, Gte, In, SearchRequest
from advisors_app.definition.registry import advisor_types, params_errors
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.stores.vectors import DEFAULT_EF_SEARCH, PgVectorStore, _equalities
from tests.embeddings import WordEmbeddingModel

pytestmark = pytest.mark.django_db

ROWS = 800
RARE = 80  # metadata "g" == 0 on every 80th row: 10 rows, 1.25% of the table


@pytest.fixture
def table():
    """A collection of ROWS random unit vectors (a quarter of them in a second collection, so
    the collection scope is a real filter too), analysed like a live table."""
    rng = np.random.default_rng(23)
    vectors = rng.standard_normal((ROWS, 384))
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ours = Collection.objects.create(slug="indexed", name="Indexed")
    other = Collection.objects.create(slug="other", name="Other")
    DocumentRow.objects.bulk_create(
        DocumentRow(
            id=f"r{i}",
            collection=other if i % 4 == 1 else ours,
            content=f"row {i}",
            content_hash=f"{i:064d}",
            metadata={"g": i % RARE},
            embedding=vectors[i].tolist(),
        )
        for i in range(ROWS)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE advisors_app_document")
    return ours, vectors, rng


class PlanRecorder:
    """Explains (ANALYZE, JSON) every similarity query before it runs, with its settings."""

    def __init__(self) -> None:
        self.plans: list[dict] = []
        self.ef_search: list[str] = []

    def __call__(self, execute, sql, params, many, context):
        if sql.lstrip().upper().startswith("SELECT") and "<=>" in sql:
            cursor = context["cursor"]
            cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, params)
            [[plan]] = cursor.fetchone()
            self.plans.append(plan if isinstance(plan, dict) else json.loads(plan)[0])
            cursor.execute("SELECT current_setting('hnsw.ef_search')")
            self.ef_search.append(cursor.fetchone()[0])
        return execute(sql, params, many, context)


def nodes(plan: dict) -> list[dict]:
    found, stack = [], [plan["Plan"]]
    while stack:
        node = stack.pop()
        found.append(node)
        stack.extend(node.get("Plans", []))
    return found


def search(store, model, query, **options):
    model.table["probe"] = query.tolist()
    recorder = PlanRecorder()
    with connection.execute_wrapper(recorder):
        result = store.search_vector(query.tolist(), SearchRequest("probe", **options))
    return result, recorder


def exact_ids(vectors, query, keep):
    ranked = sorted(keep, key=lambda i: -float(vectors[i] @ query))
    return [f"r{i}" for i in ranked]


def test_a_filter_keeping_few_rows_is_searched_exactly_through_the_metadata_index(table):
    """10 rows kept (below EXACT_BELOW): the GIN index on metadata finds them, their distances
    are computed, and the result says exact. The table is small, so the planner is told off
    sequential scans, as it would be by the table's size in a real collection."""
    collection, vectors, rng = table
    model = WordEmbeddingModel()
    store = PgVectorStore(collection, model)
    query = rng.standard_normal(384)
    query /= np.linalg.norm(query)

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        result, recorder = search(store, model, query, top_k=5, filter_expression=Eq("g", 0))

    keep = [i for i in range(ROWS) if i % RARE == 0]
    assert result.exact
    assert [d.id for d in result.documents] == exact_ids(vectors, query, keep)[:5]
    [plan] = recorder.plans
    kinds = [(n["Node Type"], n.get("Index Name")) for n in nodes(plan)]
    assert ("Bitmap Index Scan", "advisors_document_meta") in kinds
    assert all(name != "advisors_document_hnsw" for _, name in kinds)


def test_a_1pct_filter_above_the_exact_threshold_uses_the_hnsw_index(table, monkeypatch):
    monkeypatch.setattr(PgVectorStore, "exact_below", 0)
    collection, vectors, rng = table
    model = WordEmbeddingModel()
    store = PgVectorStore(collection, model)
    query = rng.standard_normal(384)
    query /= np.linalg.norm(query)

    result, recorder = search(store, model, query, top_k=5, filter_expression=Eq("g", 0))

    keep = [i for i in range(ROWS) if i % RARE == 0]
    assert not result.exact
    assert [d.id for d in result.documents] == exact_ids(vectors, query, keep)[:5]
    [plan] = recorder.plans
    kinds = [(n["Node Type"], n.get("Index Name")) for n in nodes(plan)]
    assert ("Index Scan", "advisors_document_hnsw") in kinds
    assert all(kind not in {"Seq Scan", "Sort", "Bitmap Heap Scan"} for kind, _ in kinds)
    assert plan["Plan"]["Actual Rows"] == 5


def test_without_the_store_settings_the_planner_would_scan_and_sort(table):
    """The 'before': iterative scans alone leave the planner's choice to its estimate of the
    JSON filter (0.5% of rows), and a sequential scan plus a sort looks cheaper."""
    collection, _, rng = table
    queryset = (
        DocumentRow.objects.filter(collection=collection, metadata__g=0)
        .order_by(CosineDistance("embedding", rng.standard_normal(384).tolist()))
        .values("pk")[:5]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
        plan = queryset.explain()
    assert "advisors_document_hnsw" not in plan
    assert "Sort" in plan


def test_fewer_matches_than_top_k_fall_back_to_exact_search_and_say_so(table, monkeypatch):
    monkeypatch.setattr(PgVectorStore, "exact_below", 0)
    collection, vectors, rng = table
    model = WordEmbeddingModel()
    store = PgVectorStore(collection, model)
    query = rng.standard_normal(384)
    query /= np.linalg.norm(query)

    result, recorder = search(store, model, query, top_k=20, filter_expression=Eq("g", 0))

    keep = [i for i in range(ROWS) if i % RARE == 0]
    assert result.exact
    assert [d.id for d in result.documents] == exact_ids(vectors, query, keep)
    hnsw, exact = recorder.plans
    assert "advisors_document_hnsw" in json.dumps(hnsw)
    assert "advisors_document_hnsw" not in json.dumps(exact)


def test_a_similarity_threshold_cuts_the_top_k_without_an_exact_rerun(table):
    collection, vectors, _ = table
    model = WordEmbeddingModel()
    store = PgVectorStore(collection, model)
    query = vectors[2]  # in the collection: similarity 1 with itself, ~0 with the others

    result, recorder = search(store, model, query, top_k=5, similarity_threshold=0.9)

    assert [d.id for d in result.documents] == ["r2"]
    assert not result.exact and len(recorder.plans) == 1


def test_ef_search_comes_from_the_request_else_the_collection_else_40(table):
    collection, _, rng = table
    model = WordEmbeddingModel()
    query = rng.standard_normal(384)
    store = PgVectorStore(collection, model)
    assert search(store, model, query, top_k=5)[1].ef_search == [str(DEFAULT_EF_SEARCH)]
    assert search(store, model, query, top_k=60)[1].ef_search[0] == "60"  # never below top_k
    assert store.ef_search_for(SearchRequest(top_k=5000)) == 1000  # pgvector's maximum
    collection.ef_search = 200
    collection.save()
    store = PgVectorStore("indexed", model)
    assert search(store, model, query, top_k=5)[1].ef_search[0] == "200"
    assert search(store, model, query, top_k=5, ef_search=400)[1].ef_search[0] == "400"


@pytest.mark.parametrize("value", [9, 1001, True, "40", 40.0])
def test_a_request_ef_search_outside_10_to_1000_is_refused(value):
    with pytest.raises(ValueError, match=r"ef_search must be an integer in \[10, 1000\]"):
        SearchRequest("q", ef_search=value)


def test_a_collection_ef_search_outside_its_bounds_is_refused():
    collection = Collection(slug="c", name="C", ef_search=5)
    with pytest.raises(ValidationError) as error:
        collection.full_clean()
    assert "ef_search" in error.value.message_dict
    with pytest.raises(IntegrityError), transaction.atomic():
        collection.save()


@pytest.mark.parametrize("key", ["question_answer", "retrieval_augmentation"])
def test_the_retrieval_types_take_ef_search_within_bounds(key):
    base = {"collection": "indexed"}
    assert params_errors(key, {**base, "ef_search": 100}) == {}
    assert "params.ef_search" in params_errors(key, {**base, "ef_search": 5})
    assert "params.ef_search" in params_errors(key, {**base, "ef_search": 5000})
    schema = advisor_types.get(key).params_schema
    assert schema["properties"]["ef_search"]["maximum"] == 1000


def test_the_retriever_sends_its_ef_search_with_every_search():
    from advisors_app.core.rag import Query, VectorStoreDocumentRetriever

    seen = []

    class Store:
        def for_context(self, context):
            return self

        async def asimilarity_search(self, request):
            seen.append(request.ef_search)
            return []

    retriever = VectorStoreDocumentRetriever(Store(), ef_search=200)
    async_to_sync(retriever.retrieve)(Query("hi"))
    assert seen == [200]


def test_only_equality_filters_are_estimated_for_the_exact_path():
    """The planner's estimate is asked of containments only: for JSON expressions (type
    guards, ranges) it guesses 0.5% a condition, which would call every filter selective."""
    assert _equalities(Eq("g", 0)) == {"g": 0}
    assert _equalities(And(Eq("g", 0), Eq("t", "a"))) == {"g": 0, "t": "a"}
    assert _equalities(And(Eq("g", 0), Eq("g", 1))) is None  # one key twice: left to the scan
    assert _equalities(Gt("g", 0)) is None
    assert _equalities(In("g", [0, 1])) is None
    assert _equalities(And(Eq("g", 0), Gt("h", 1))) is None


def test_a_range_filter_starts_with_the_hnsw_scan(table):
    collection, _, rng = table
    model = WordEmbeddingModel()
    store = PgVectorStore(collection, model)
    result, recorder = search(
        store, model, rng.standard_normal(384), top_k=5, filter_expression=Gte("g", 40)
    )
    assert not result.exact
    assert "advisors_document_hnsw" in json.dumps(recorder.plans[0])
