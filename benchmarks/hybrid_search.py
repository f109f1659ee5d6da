"""Hybrid retrieval (issue 41): quality on the demo's questions, latency at 100,000 chunks,
and the cost of reranking 20 candidates.

1. **Quality** — the ``python-docs`` demo collection as ``load_demo`` builds it (551 chunks of
   the Python Language Reference, each with its title as context line, real MiniLM
   embeddings) in a throwaway database, and the demo's two datasets: the 52 identifier
   questions (``python-docs-identifier-questions``: a hit is a chunk holding the identifier
   asked about) and the 54 questions in plain words (``python-docs-questions``: a chunk of the
   right topic). hit@5 and MRR (the retrieval evaluators) for vector search (the peer: what
   the demo did before), lexical, hybrid, and hybrid with the top 20 reranked (``bm25``), at
   the collection's shipped defaults, through ``manage.py retrieval_tune``'s own code.
2. **Latency** — ``--rows`` (100,000) real sentences with their MiniLM vectors (the corpus and
   cache of ``vector_search.py``) as chunks with their lexical index, the HNSW and GIN indexes
   built; ``PgVectorStore.search_vector`` top 5 of 200 held-out query sentences, hybrid
   without a filter and with a filter keeping 1% of the rows, beside vector search alone (the
   peer), query embedding excluded.
3. **Reranking** — ``Bm25Reranker`` over the 20 best chunks of each demo question.

Run: ``python benchmarks/hybrid_search.py [--rows 100000] [--json PATH]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "advisorsite.settings")
os.environ.setdefault("ADVISORS_EMBEDDED_DB", "throwaway")
os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only")

from benchmarks._common import header, machine, percentile, write_json

TOP_K = 5
RERANK_N = 20
QUERIES = 200


def quality() -> dict:
    """Section 1 (see the module docstring)."""
    from advisors_app.demo.dataset import DATASET, IDENTIFIER_DATASET
    from advisors_app.demo.loader import COLLECTION, load_demo
    from advisors_app.management.commands.retrieval_tune import (
        questions_of,
        quick_settings,
        try_settings,
    )
    from advisors_app.models import Collection
    from advisors_app.stores.vectors import PgVectorStore

    start = time.perf_counter()
    report = load_demo()
    print(f"demo collection: {report.chunks} chunks in {time.perf_counter() - start:.0f} s")
    store = PgVectorStore(Collection.objects.get(slug=COLLECTION))
    datasets = {name: questions_of(name) for name in (IDENTIFIER_DATASET, DATASET)}
    results = {}
    print(f"{'setting':46}{'identifier hit@5 / mrr':>26}{'plain words hit@5 / mrr':>26}")
    for tried in try_settings(store, datasets, quick_settings(), TOP_K):
        name = tried.setting.mode + ("+rerank" if tried.setting.top_n else "")
        ident, plain = tried.scores[IDENTIFIER_DATASET], tried.scores[DATASET]
        results[name] = {
            "identifier_hit5": ident[0],
            "identifier_mrr": ident[1],
            "plain_hit5": plain[0],
            "plain_mrr": plain[1],
            "p50_ms": tried.p50_ms,
        }
        print(f"{name:46}{ident[0]:>17.3f} / {ident[1]:.3f}{plain[0]:>19.3f} / {plain[1]:.3f}")
    results["questions"] = {name: len(items) for name, items in datasets.items()}
    return results


def rerank_cost() -> dict:
    """Section 3: Bm25Reranker over the 20 best chunks of each demo question, p50 ms."""
    from asgiref.sync import async_to_sync

    from advisors_app.core.rag import Bm25Reranker
    from advisors_app.core.vectorstore import SearchRequest
    from advisors_app.demo.dataset import DATASET
    from advisors_app.demo.loader import COLLECTION
    from advisors_app.management.commands.retrieval_tune import questions_of
    from advisors_app.models import Collection
    from advisors_app.stores.vectors import PgVectorStore

    store = PgVectorStore(Collection.objects.get(slug=COLLECTION))
    reranker = Bm25Reranker()
    times = []
    for message, _ in questions_of(DATASET):
        candidates = store.similarity_search(
            SearchRequest(message, top_k=RERANK_N, search_mode="hybrid")
        )
        for _ in range(5):
            start = time.perf_counter()
            async_to_sync(reranker.rerank)(message, candidates)
            times.append((time.perf_counter() - start) * 1000)
    return {"p50_ms": statistics.median(times), "p99_ms": percentile(times, 0.99)}


def load_chunks(collection, sentences: list[str], vectors: np.ndarray) -> float:
    """COPY the sentences and vectors in, then write their lexical index in SQL."""
    from django.db import connection
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    from advisors_app.core.vectorstore import lexical_text

    start = time.perf_counter()
    # A few docstrings hold NUL characters, which no PostgreSQL text stores.
    sentences = [text.replace("\x00", "") for text in sentences]
    connection.ensure_connection()
    register_vector(connection.connection)
    created = datetime.now(UTC)
    columns = "id, collection_id, tenant, source, content, metadata, content_hash, embedding"
    types = ["text", "int8", "text", "text", "text", "jsonb", "text", "vector", "timestamptz"]
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS advisors_document_hnsw")
        cursor.execute("DROP INDEX IF EXISTS advisors_document_lexical")
        cursor.execute("CREATE TEMP TABLE lexical (id text, words text, exact text)")
        copy_sql = (
            f"COPY advisors_app_document ({columns}, created_at) FROM STDIN WITH (FORMAT BINARY)"
        )
        ids = [str(uuid.uuid4()) for _ in sentences]
        with connection.connection.cursor() as raw:
            with raw.copy(copy_sql) as copy:
                copy.set_types(types)
                for i, (text, vector) in enumerate(zip(sentences, vectors, strict=True)):
                    metadata = Jsonb({"group": i % 100})
                    row = (ids[i], collection.pk, "", "bench", text, metadata, f"{i:064x}")
                    copy.write_row((*row, vector, created))
            with raw.copy("COPY lexical (id, words, exact) FROM STDIN") as copy:
                for pk, text in zip(ids, sentences, strict=True):
                    split = lexical_text(text)
                    copy.write_row((pk, split.words, split.exact))
        cursor.execute(
            "UPDATE advisors_app_document AS d SET search_vector = "
            "setweight(to_tsvector('english', l.words), 'D') || "
            "setweight(to_tsvector('simple', l.exact), 'A') FROM lexical AS l WHERE d.id = l.id"
        )
        cursor.execute("DROP TABLE lexical")
    return time.perf_counter() - start


def build_indexes() -> float:
    from django.db import connection

    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
        cursor.execute(
            "CREATE INDEX advisors_document_hnsw ON advisors_app_document "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        cursor.execute(
            "CREATE INDEX advisors_document_lexical ON advisors_app_document "
            "USING gin (search_vector)"
        )
        cursor.execute("SELECT gin_clean_pending_list('advisors_document_meta')")
        cursor.execute("VACUUM ANALYZE advisors_app_document")
    return time.perf_counter() - start


def latency(rows: int) -> dict:
    """Section 2 (see the module docstring)."""
    from benchmarks.vector_search import embedded_corpus

    sentences, vectors = embedded_corpus(QUERIES + rows)
    queries, query_vectors = sentences[:QUERIES], vectors[:QUERIES]
    from advisors_app.core.vectorstore import Eq, SearchRequest
    from advisors_app.models import Collection
    from advisors_app.stores.vectors import PgVectorStore

    collection, _ = Collection.objects.get_or_create(slug="hybrid-bench", defaults={"name": "B"})
    print(f"\n{rows:,} chunks: loading ... ", end="", flush=True)
    loaded = load_chunks(collection, sentences[QUERIES : QUERIES + rows], vectors[QUERIES:])
    print(f"{loaded:.1f} s; building the HNSW and GIN indexes ... ", end="", flush=True)
    built = build_indexes()
    print(f"{built:.1f} s")
    store = PgVectorStore(collection, _NoModel())
    results: dict = {"rows": rows, "load_s": loaded, "index_build_s": built}
    cases = {
        "vector": {"search_mode": "vector"},
        "hybrid": {"search_mode": "hybrid"},
        "vector_filter_1pct": {"search_mode": "vector", "filter_expression": Eq("group", 7)},
        "hybrid_filter_1pct": {"search_mode": "hybrid", "filter_expression": Eq("group", 7)},
    }
    times: dict[str, list[float]] = {case: [] for case in cases}
    for repeat in range(2):  # the first pass warms the caches; the second is measured
        for text, vector in zip(queries, query_vectors, strict=True):
            for case, options in cases.items():
                request = SearchRequest(text, top_k=TOP_K, **options)
                start = time.perf_counter()
                store.search_vector(vector.tolist(), request)
                if repeat:
                    times[case].append((time.perf_counter() - start) * 1000)
    for case, measured in times.items():
        results[case] = {
            "p50_ms": statistics.median(measured),
            "p99_ms": percentile(measured, 0.99),
        }
        print(f"{case:22} p50 {results[case]['p50_ms']:6.2f} ms  p99 {results[case]['p99_ms']:.2f}")
    collection.delete()
    return results


class _NoModel:
    """The store's embedding model slot: the benchmark passes vectors, never text."""

    dimensions = 384

    def embed_sync(self, texts):
        raise AssertionError("the benchmark searches by vector")

    async def embed(self, texts):
        raise AssertionError("the benchmark searches by vector")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000, help="chunks for the latency rows")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()
    header(
        "hybrid search",
        "hit@5 and MRR of vector / lexical / hybrid / hybrid+rerank on the demo's identifier "
        f"and plain questions; hybrid p50 at {args.rows:,} chunks (real MiniLM vectors) with "
        "and without a 1% filter; Bm25Reranker over 20 candidates",
        info,
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    results = {"quality": quality(), "rerank": rerank_cost(), "latency": latency(args.rows)}
    rerank = results["rerank"]
    print(f"\nrerank 20 candidates: p50 {rerank['p50_ms']:.2f} ms, p99 {rerank['p99_ms']:.2f} ms")
    write_json(
        args.json,
        "hybrid_search",
        {"rows": args.rows, "top_k": TOP_K, "rerank_candidates": RERANK_N, "queries": QUERIES},
        results,
        info,
    )


if __name__ == "__main__":
    main()
