"""HNSW search on pgvector against exact search: top-10 latency and recall@10.

100,000 × 384-dimensional unit vectors (clustered, like sentence embeddings: one topic centre
per 50 rows, 2,000 at 100,000, plus noise) are loaded into ``advisors_app.Document`` of a
throwaway embedded PostgreSQL (or ``DATABASE_URL``); the HNSW cosine index is built as the
app's migration defines it. For 200 queries it measures ``PgVectorStore.similarity_search``
(HNSW, iterative scan) and the exact answer (the same query with index scans off, and numpy
brute force), with and without a metadata filter matching 1% of rows. Run:
``python benchmarks/vector_search.py`` (about two minutes on two cores; ``--queries`` to scale;
``--rows 10000,30000,100000`` measures each size in turn, a scaling curve; ``--sparse-rows
100000`` adds a harder set with 2 rows per topic, unfiltered; ``--json PATH`` writes the
results).
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

from benchmarks._common import describe, machine, write_json

DIMENSIONS = 384
TOP_K = 10
ROWS_PER_CENTRE = 50  # the same density at every size, so sizes differ only in size
GROUPS = 100  # the filtered scenario keeps group == 7: 1% of rows


class TableEmbeddingModel:
    """Embeds the benchmark's query names to their precomputed vectors (no model time)."""

    dimensions = DIMENSIONS

    def __init__(self) -> None:
        self.table: dict[str, list[float]] = {}

    def embed_sync(self, texts):
        return [self.table[t] for t in texts]

    async def embed(self, texts):
        return self.embed_sync(texts)


def clustered(rng: np.random.Generator, n: int, centres: np.ndarray) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), n)]
    # Noise of norm ~0.8 around a unit centre: neighbours share a topic, as embeddings do.
    vectors = picks + 0.8 * rng.standard_normal((n, DIMENSIONS)) / np.sqrt(DIMENSIONS)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def load(collection, vectors: np.ndarray) -> float:
    from django.db import connection
    from pgvector.psycopg import register_vector
    from psycopg.types.json import Jsonb

    start = time.perf_counter()
    connection.ensure_connection()
    register_vector(connection.connection)  # binary COPY of the vector column
    created = datetime.now(UTC)
    columns = "id, collection_id, tenant, source, content, metadata, content_hash, embedding"
    types = ["text", "int8", "text", "text", "text", "jsonb", "text", "vector"]
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS advisors_document_hnsw")
        copy_sql = (
            f"COPY advisors_app_document ({columns}, created_at) FROM STDIN WITH (FORMAT BINARY)"
        )
        with connection.connection.cursor() as raw, raw.copy(copy_sql) as copy:
            copy.set_types([*types, "timestamptz"])
            for i, vector in enumerate(vectors):
                row = ("", "bench", f"row {i}", Jsonb({"group": i % GROUPS}), f"{i:064x}")
                copy.write_row((str(uuid.uuid4()), collection.pk, *row, vector, created))
    return time.perf_counter() - start


def build_index() -> float:
    from django.db import connection

    start = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute("SET maintenance_work_mem = '1GB'")
        cursor.execute("SET max_parallel_maintenance_workers = 1")
        cursor.execute(
            "CREATE INDEX advisors_document_hnsw ON advisors_app_document "
            "USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        cursor.execute("ANALYZE advisors_app_document")
    return time.perf_counter() - start


def measure(
    store, model: TableEmbeddingModel, vectors: np.ndarray, queries: np.ndarray, filters: bool
) -> dict:
    """HNSW and exact search of every query, without and (``filters``) with the 1% filter."""
    from advisors_app.core.vectorstore import Eq, SearchRequest

    rows = len(vectors)
    results: dict = {}
    contents = np.array([f"row {i}" for i in range(rows)])
    groups = np.arange(rows) % GROUPS
    scenarios = [("no_filter", "no filter", None, np.ones(rows, dtype=bool))]
    if filters:
        scenarios.append(("filter_1pct", "filter group == 7 (1%)", Eq("group", 7), groups == 7))
    for key, label, expression, mask in scenarios:
        hnsw_ms, exact_ms, numpy_ms, recall, exact_sql_agrees = [], [], [], [], 0
        # The in-process peer searches a matrix it already holds (filtered once, not per query).
        subset, subset_contents = np.ascontiguousarray(vectors[mask]), contents[mask]
        for q, query in enumerate(queries):
            name = f"q{q}"
            model.table[name] = query.tolist()
            request = SearchRequest(name, top_k=TOP_K, filter_expression=expression)
            start = time.perf_counter()
            found = store.similarity_search(request)
            hnsw_ms.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            exact = store._query(query.tolist(), request, exact=True)
            exact_ms.append((time.perf_counter() - start) * 1e3)
            start = time.perf_counter()
            scores = subset @ query
            best = np.argpartition(-scores, TOP_K)[:TOP_K]
            truth = set(subset_contents[best])
            numpy_ms.append((time.perf_counter() - start) * 1e3)
            recall.append(len({d.text for d in found} & truth) / TOP_K)
            exact_sql_agrees += {d.text for d in exact} == truth
        hnsw, exact_p50 = statistics.median(hnsw_ms), statistics.median(exact_ms)
        print(f"\n{label}: {len(queries)} queries, top-{TOP_K}")
        print(
            f"  HNSW (PgVectorStore)  p50 {hnsw:7.2f} ms  p95 {np.percentile(hnsw_ms, 95):7.2f} ms"
        )
        speedup = exact_p50 / hnsw
        print(f"  exact SQL (no index)  p50 {exact_p50:7.2f} ms  -> HNSW {speedup:5.1f}x faster")
        print(
            f"  numpy brute force     p50 {statistics.median(numpy_ms):7.2f} ms (in-process peer)"
        )
        print(
            f"  recall@{TOP_K} vs exact: {statistics.mean(recall):.3f} "
            f"(exact SQL matches numpy on {exact_sql_agrees}/{len(queries)})"
        )
        results[key] = {
            "hnsw_p50_ms": hnsw,
            "hnsw_p95_ms": float(np.percentile(hnsw_ms, 95)),
            "exact_sql_p50_ms": exact_p50,
            "numpy_p50_ms": statistics.median(numpy_ms),
            "recall_at_10": statistics.mean(recall),
            "exact_sql_agrees": exact_sql_agrees,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000", help="rows, or a list (10000,100000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--sparse-rows", type=int, default=0, help="also this many rows at 2 rows per topic"
    )
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from advisors_app.models import Collection
    from advisors_app.stores.vectors import PgVectorStore

    call_command("migrate", verbosity=0)
    sizes = sorted({int(r) for r in args.rows.split(",") if r.strip()})
    collection, _ = Collection.objects.get_or_create(slug="benchmark", defaults={"name": "Bench"})
    collection.documents.all().delete()
    print(f"# vector search — {describe(info)}")

    model = TableEmbeddingModel()
    store = PgVectorStore(collection, model)

    def run(rows: int, per_centre: int, filters: bool = True) -> dict:
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM advisors_app_document WHERE collection_id = %s", [collection.pk]
            )
            cursor.execute("VACUUM advisors_app_document")  # no dead rows in the exact scans
        rng = np.random.default_rng(42)
        centres = rng.standard_normal((max(1, rows // per_centre), DIMENSIONS))
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        vectors = clustered(rng, rows, centres)
        queries = clustered(rng, args.queries, centres)
        print(
            f"\n{rows:,} x {DIMENSIONS}, {per_centre} rows per topic: loading ... ",
            end="",
            flush=True,
        )
        size = {"load_s": load(collection, vectors)}
        print(
            f"{size['load_s']:.1f} s; building the HNSW index (m=16, ef_construction=64) ... ",
            end="",
            flush=True,
        )
        size["index_build_s"] = build_index()
        print(f"{size['index_build_s']:.1f} s")
        size.update(measure(store, model, vectors, queries, filters))
        return size

    results: dict = {"sizes": {str(rows): run(rows, ROWS_PER_CENTRE) for rows in sizes}}
    if args.sparse_rows:
        # Few rows per topic: neighbours are spread over topics, a harder case for HNSW.
        results["sparse"] = {"rows": args.sparse_rows, **run(args.sparse_rows, 2, False)}
    # The largest size is the headline figure.
    results.update(results["sizes"][str(sizes[-1])])
    collection.delete()
    write_json(
        args.json,
        "vector_search",
        {"rows": sizes[-1], "sizes": sizes, "dimensions": DIMENSIONS, "queries": args.queries}
        | {"top_k": TOP_K},
        results,
        info,
    )


if __name__ == "__main__":
    main()
