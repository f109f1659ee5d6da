"""HNSW search on pgvector against exact search: top-10 latency and recall@10.

100,000 × 384-dimensional unit vectors (clustered, like sentence embeddings: 2,000 topic
centres plus noise) are loaded into ``advisors_app.Document`` of a throwaway embedded
PostgreSQL (or ``DATABASE_URL``); the HNSW cosine index is built as the app's migration
defines it. For 200 queries it measures ``PgVectorStore.similarity_search`` (HNSW, iterative
scan) and the exact answer (the same query with index scans off, and numpy brute force), with
and without a metadata filter matching 1% of rows. Run: ``python benchmarks/vector_search.py``
(about two to four minutes on two cores; ``--rows`` / ``--queries`` to scale).
"""

from __future__ import annotations

import argparse
import os
import platform
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

DIMENSIONS = 384
TOP_K = 10
CENTRES = 2_000
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()

    import django

    django.setup()
    from django.core.management import call_command

    from advisors_app.core.vectorstore import Eq, SearchRequest
    from advisors_app.models import Collection
    from advisors_app.stores.vectors import PgVectorStore

    call_command("migrate", verbosity=0)
    rng = np.random.default_rng(42)
    centres = rng.standard_normal((CENTRES, DIMENSIONS))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    vectors = clustered(rng, args.rows, centres)
    queries = clustered(rng, args.queries, centres)
    collection, _ = Collection.objects.get_or_create(slug="benchmark", defaults={"name": "Bench"})
    collection.documents.all().delete()
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    print(f"loading {args.rows:,} x {DIMENSIONS} vectors ... ", end="", flush=True)
    print(f"{load(collection, vectors):.1f} s")
    print("building the HNSW index (m=16, ef_construction=64) ... ", end="", flush=True)
    print(f"{build_index():.1f} s")

    model = TableEmbeddingModel()
    store = PgVectorStore(collection, model)
    contents = np.array([f"row {i}" for i in range(args.rows)])
    groups = np.arange(args.rows) % GROUPS
    for label, expression, mask in [
        ("no filter", None, np.ones(args.rows, dtype=bool)),
        ("filter group == 7 (1%)", Eq("group", 7), groups == 7),
    ]:
        hnsw_ms, exact_ms, numpy_ms, recall, exact_sql_agrees = [], [], [], [], 0
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
            scores = vectors[mask] @ query
            best = np.argpartition(-scores, TOP_K)[:TOP_K]
            truth = set(contents[mask][best])
            numpy_ms.append((time.perf_counter() - start) * 1e3)
            recall.append(len({d.text for d in found} & truth) / TOP_K)
            exact_sql_agrees += {d.text for d in exact} == truth
        hnsw, exact_p50 = statistics.median(hnsw_ms), statistics.median(exact_ms)
        print(f"\n{label}: {args.queries} queries, top-{TOP_K}")
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
            f"(exact SQL matches numpy on {exact_sql_agrees}/{args.queries})"
        )
    collection.delete()


if __name__ == "__main__":
    main()
