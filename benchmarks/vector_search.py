"""HNSW search on pgvector over real MiniLM embeddings: recall@10 and p50/p99 latency.

The corpus is real English text that ships with Python and the installed packages, read offline:
the sentences of the standard library's docstrings, of ``pydoc_data.topics`` (the reference
manual's topics) and of the docstrings of every package in the running interpreter's
site-packages (30–300 characters, mostly letters, each once), shuffled with a fixed seed. The
first ``--queries`` sentences are the queries, held out of every table; the next ``rows`` are
loaded into ``advisors_app.Document`` of a throwaway embedded PostgreSQL (or ``DATABASE_URL``)
with metadata ``{"group": i % 100, "decile": i % 10}`` and the HNSW cosine index the migration
defines (``m=16``, ``ef_construction=64``).

Embedding takes long on a small machine (all-MiniLM-L6-v2, ~100–400 sentences a second on two
shared cores): the sentences and their vectors are cached in ``var/benchmarks/minilm_corpus.npz``
(gitignored) and only the missing ones are embedded on a rerun with more rows.

For every query it measures ``PgVectorStore.search_vector`` (query embedding time excluded) at
each ``--ef`` value (a per-request ``ef_search``), without a filter and with metadata filters
keeping 1% (``group == 7``) and 10% (``decile == 3``) of the rows; recall@10 is against numpy's
exact answer over the same rows. The store searches a filter that keeps at most
``EXACT_BELOW`` rows exactly (the rows found through the metadata index) and the rest with an
iterative HNSW scan: searches that were exact are counted and reported as exact. The exact SQL
(index scans off) and numpy are the peers.
Run: ``python benchmarks/vector_search.py`` (``--rows 10000,30000,100000`` measures each size in
turn; ``--json PATH`` writes the results).
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import statistics
import sys
import sysconfig
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

ROOT = Path(__file__).resolve().parent.parent
DIMENSIONS = 384
TOP_K = 10
CACHE = ROOT / "var" / "benchmarks" / "minilm_corpus.npz"
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
EMBED_BATCH = 64


# -- the corpus ---------------------------------------------------------------------------------


def _docstrings(folder: Path, skip_site_packages: bool) -> list[str]:
    texts = []
    for path in sorted(folder.rglob("*.py")):
        if skip_site_packages and "site-packages" in path.parts:
            continue
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                text = ast.get_docstring(node)
                if text:
                    texts.append(text)
    return texts


def read_corpus() -> list[str]:
    """Every distinct sentence of the sources in the module docstring, in a fixed order."""
    import pydoc_data.topics

    texts = _docstrings(Path(sysconfig.get_paths()["stdlib"]), skip_site_packages=True)
    texts += list(pydoc_data.topics.topics.values())
    texts += _docstrings(Path(sysconfig.get_paths()["purelib"]), skip_site_packages=False)
    seen: set[str] = set()
    sentences = []
    for text in texts:
        for sentence in SENTENCE_END.split(" ".join(text.split())):
            sentence = sentence.strip()
            letters = sum(c.isalpha() for c in sentence)
            wanted = 30 <= len(sentence) <= 300 and letters > 0.6 * len(sentence)
            if wanted and sentence not in seen:
                seen.add(sentence)
                sentences.append(sentence)
    random.Random(23).shuffle(sentences)
    return sentences


def embedded_corpus(needed: int) -> tuple[list[str], np.ndarray]:
    """Every sentence, and unit MiniLM vectors of the first ``needed`` (from the cache if there)."""
    if CACHE.exists():
        cached = np.load(CACHE, allow_pickle=False)
        sentences, vectors = json.loads(str(cached["sentences"])), cached["vectors"]
    else:
        print("reading the corpus (docstrings, pydoc topics) ... ", end="", flush=True)
        start = time.perf_counter()
        sentences, vectors = read_corpus(), np.zeros((0, DIMENSIONS), dtype=np.float32)
        print(f"{len(sentences):,} sentences in {time.perf_counter() - start:.0f} s")
    if needed > len(sentences):
        raise SystemExit(
            f"the corpus has {len(sentences):,} sentences; {needed:,} were asked for "
            "(rows + queries)"
        )
    if len(vectors) < needed:
        from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel

        model, todo = MiniLmEmbeddingModel(), sentences[len(vectors) : needed]
        print(f"embedding {len(todo):,} sentences with MiniLM (cached for reruns) ...", flush=True)
        start, parts = time.perf_counter(), [vectors]
        for first in range(0, len(todo), EMBED_BATCH):
            batch = np.asarray(model.embed_sync(todo[first : first + EMBED_BATCH]), np.float32)
            parts.append(batch / np.linalg.norm(batch, axis=1, keepdims=True))
            done = first + len(batch)
            if done % (EMBED_BATCH * 40) < EMBED_BATCH:
                rate = done / (time.perf_counter() - start)
                print(f"  {done:,}/{len(todo):,} ({rate:.0f} sentences/s)", flush=True)
            if done % (EMBED_BATCH * 160) < EMBED_BATCH or done == len(todo):
                vectors = np.concatenate(parts)
                parts = [vectors]
                CACHE.parent.mkdir(parents=True, exist_ok=True)
                np.savez(CACHE, sentences=json.dumps(sentences), vectors=vectors)
    return sentences, vectors[:needed]


# -- the table ----------------------------------------------------------------------------------


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
                metadata = Jsonb({"group": i % 100, "decile": i % 10})
                row = ("", "bench", f"row {i}", metadata, f"{i:064x}")
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
        # The rows came in with the metadata GIN index in place: its pending list holds them
        # until VACUUM (autovacuum on a live table) moves them into the index proper.
        cursor.execute("SELECT gin_clean_pending_list('advisors_document_meta')")
        cursor.execute("ANALYZE advisors_app_document")
    return time.perf_counter() - start


class PlanRecorder:
    """``EXPLAIN (ANALYZE)`` of the first similarity query the store runs, with its settings."""

    def __init__(self) -> None:
        self.plan = ""

    def __call__(self, execute, sql, params, many, context):
        # The EXPLAIN goes through the same wrapper: only a SELECT is explained.
        if not self.plan and "<=>" in sql and sql.lstrip().upper().startswith("SELECT"):
            cursor = context["cursor"]
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF, BUFFERS OFF) " + sql, params)
            self.plan = "\n".join(
                line[:110] + (" …" if len(line) > 110 else "") for (line,) in cursor.fetchall()
            )
        return execute(sql, params, many, context)


# -- the measurements ---------------------------------------------------------------------------

SCENARIOS = (
    ("no_filter", "no filter", None, 1.0),
    ("filter_1pct", "filter group == 7 (1%)", ("group", 100, 7), 0.01),
    ("filter_10pct", "filter decile == 3 (10%)", ("decile", 10, 3), 0.10),
)


def measure(store, vectors: np.ndarray, queries: np.ndarray, efs: list[int], headline: int):
    """Every scenario at every ``ef_search``; the ``headline`` ef's figures at the top level."""
    from django.db import connection

    from advisors_app.core.vectorstore import Eq, SearchRequest

    rows = len(vectors)
    contents = np.array([f"row {i}" for i in range(rows)])
    results: dict = {}
    for key, label, spec, share in SCENARIOS:
        expression, mask = None, np.ones(rows, dtype=bool)
        if spec is not None:
            name, modulus, value = spec
            expression, mask = Eq(name, value), np.arange(rows) % modulus == value
        subset, subset_contents = np.ascontiguousarray(vectors[mask]), contents[mask]
        truths, numpy_ms = [], []
        for query in queries:
            start = time.perf_counter()
            best = np.argpartition(-(subset @ query), TOP_K)[:TOP_K]
            numpy_ms.append((time.perf_counter() - start) * 1e3)
            truths.append(set(subset_contents[best]))
        exact_ms = []
        for query in queries[: max(10, len(queries) // 4)]:  # the slow peer: a quarter suffices
            request = SearchRequest("q", top_k=TOP_K, filter_expression=expression)
            start = time.perf_counter()
            store._query(query.tolist(), request, exact=True)
            exact_ms.append((time.perf_counter() - start) * 1e3)
        print(f"\n  {label}: {len(queries)} held-out queries, top-{TOP_K}")
        print(
            f"    exact SQL (no HNSW) p50 {statistics.median(exact_ms):7.2f} ms; numpy brute "
            f"force p50 {statistics.median(numpy_ms):6.2f} ms (in-process peer, "
            f"{mask.sum():,} rows)"
        )
        per_ef: dict = {}
        for ef in efs:
            latencies, recall, fallbacks = [], [], 0
            for query, truth in zip(queries, truths, strict=True):
                request = SearchRequest(
                    "q", top_k=TOP_K, filter_expression=expression, ef_search=ef
                )
                start = time.perf_counter()
                found = store.search_vector(query.tolist(), request)
                latencies.append((time.perf_counter() - start) * 1e3)
                fallbacks += found.exact
                recall.append(len({d.text for d in found.documents} & truth) / TOP_K)
            per_ef[str(ef)] = {
                "hnsw_p50_ms": statistics.median(latencies),
                "hnsw_p99_ms": percentile(latencies, 0.99),
                "recall_at_10": statistics.mean(recall),
                "exact_fallbacks": fallbacks,
            }
            note = f"  ({fallbacks} of them exact)" if fallbacks else ""
            print(
                f"    store ef_search={ef:<4} recall@{TOP_K} {statistics.mean(recall):.3f}  "
                f"p50 {statistics.median(latencies):7.2f} ms  p99 "
                f"{percentile(latencies, 0.99):7.2f} ms{note}"
            )
        recorder = PlanRecorder()
        with connection.execute_wrapper(recorder):
            store.search_vector(
                queries[0].tolist(),
                SearchRequest("q", top_k=TOP_K, filter_expression=expression, ef_search=headline),
            )
        print(f"    plan (ef_search={headline}):\n      " + recorder.plan.replace("\n", "\n      "))
        results[key] = {
            **per_ef[str(headline)],
            "share": share,
            "exact_sql_p50_ms": statistics.median(exact_ms),
            "numpy_p50_ms": statistics.median(numpy_ms),
            "ef_search": per_ef,
            "plan": recorder.plan,
        }
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="100000", help="rows, or a list (10000,100000)")
    parser.add_argument("--queries", type=int, default=200, help="held-out query sentences")
    parser.add_argument("--ef", default="40,100,200", help="ef_search values to measure")
    parser.add_argument(
        "--headline-ef", type=int, default=100, help="the ef_search of the summary figures"
    )
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()
    sizes = sorted({int(r) for r in args.rows.split(",") if r.strip()})
    efs = sorted({int(e) for e in args.ef.split(",") if e.strip()} | {args.headline_ef})
    header(
        "vector search",
        f"PgVectorStore.search_vector top-{TOP_K} (HNSW iterative scan; exact over the rows a "
        f"selective filter keeps) over real MiniLM "
        f"embeddings of docstring/pydoc sentences, {args.queries} held-out queries, query "
        "embedding excluded; recall against numpy exact search",
        info,
    )

    sentences, vectors = embedded_corpus(args.queries + sizes[-1])
    queries, table = vectors[: args.queries], vectors[args.queries :]
    if sizes[-1] < 100_000:
        print(f"(below the issue's 100,000 rows: {sizes[-1]:,} at most in this run)")

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from advisors_app.models import Collection
    from advisors_app.stores.vectors import PgVectorStore

    call_command("migrate", verbosity=0)
    collection, _ = Collection.objects.get_or_create(slug="benchmark", defaults={"name": "Bench"})
    store = PgVectorStore(collection, _NoModel())

    def run(rows: int) -> dict:
        with connection.cursor() as cursor:
            cursor.execute(
                "DELETE FROM advisors_app_document WHERE collection_id = %s", [collection.pk]
            )
            cursor.execute("VACUUM advisors_app_document")  # no dead rows in the exact scans
        print(f"\n{rows:,} sentences x {DIMENSIONS}: loading ... ", end="", flush=True)
        size = {"load_s": load(collection, table[:rows])}
        print(
            f"{size['load_s']:.1f} s; building the HNSW index (m=16, ef_construction=64) ... ",
            end="",
            flush=True,
        )
        size["index_build_s"] = build_index()
        print(f"{size['index_build_s']:.1f} s")
        size.update(measure(store, table[:rows], queries, efs, args.headline_ef))
        return size

    results: dict = {"sizes": {str(rows): run(rows) for rows in sizes}}
    results.update(results["sizes"][str(sizes[-1])])  # the largest size is the headline
    collection.delete()
    write_json(
        args.json,
        "vector_search",
        {
            "rows": sizes[-1],
            "sizes": sizes,
            "dimensions": DIMENSIONS,
            "queries": args.queries,
            "top_k": TOP_K,
            "ef_search": efs,
            "headline_ef_search": args.headline_ef,
            "corpus": f"{len(sentences):,} MiniLM-embedded sentences (docstrings, pydoc topics)",
        },
        results,
        info,
    )


class _NoModel:
    """The store's embedding model slot: the benchmark passes vectors, never text."""

    dimensions = DIMENSIONS

    def embed_sync(self, texts):
        raise AssertionError("the benchmark searches by vector")

    async def embed(self, texts):
        raise AssertionError("the benchmark searches by vector")


if __name__ == "__main__":
    main()
