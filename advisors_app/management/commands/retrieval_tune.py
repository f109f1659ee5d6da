"""``manage.py retrieval_tune COLLECTION DATASET...``: choose a collection's search defaults.

Every question of the datasets (items with ``expected.documents``, as the demo's
``python-docs-questions`` and ``python-docs-identifier-questions``) is embedded once, then
searched in each setting tried — the search modes, fusion weights and ``k``, reranking of the
top ``top_n`` (``bm25``, or none) and HNSW ``ef_search`` — and judged by the retrieval
evaluators (``retrieval_hit_at_k`` at ``--k`` and ``mrr``). The table of every setting is
printed, best first (the mean over the datasets of hit@k plus MRR; ties: the faster), and
the best is written as the collection's ``search_mode``, ``vector_weight``,
``lexical_weight``, ``rrf_k`` and ``ef_search`` (``--dry-run``: nothing written). The best
``top_n`` is printed for the retrieval advisors' ``rerank`` param, which a collection does not
hold. Searches see the collection's shared documents.
"""

from __future__ import annotations

import itertools
import statistics
import time
from dataclasses import dataclass
from typing import Any

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError, CommandParser

from advisors_app.core.rag import Bm25Reranker, rerank_top_k
from advisors_app.core.vectorstore import SearchRequest
from advisors_app.evaluation.evaluators.base import EvalCase
from advisors_app.evaluation.evaluators.retrieval import HitAtKEvaluator, MrrEvaluator
from advisors_app.models import Collection, Dataset, DatasetItem
from advisors_app.models.documents import DEFAULT_LEXICAL_WEIGHT, DEFAULT_RRF_K
from advisors_app.stores.vectors import PgVectorStore

__all__ = ["Setting", "Tried", "questions_of", "quick_settings", "settings_to_try", "try_settings"]

LEXICAL_WEIGHTS = (0.3, 0.5, 0.7, 1.0)
RRF_KS = (5, 10, 20, 60)
TOP_NS = (None, 10, 20, 40)
EF_SEARCHES = (40, 100)


@dataclass(frozen=True)
class Setting:
    """One combination tried."""

    mode: str
    lexical_weight: float | None = None
    rrf_k: int | None = None
    top_n: int | None = None
    ef_search: int = 40

    def __str__(self) -> str:
        fusion = f"w {self.lexical_weight:g} k {self.rrf_k}" if self.mode == "hybrid" else "-"
        return f"{self.mode:8} {fusion:12} top_n {self.top_n or '-':>3} ef {self.ef_search}"


@dataclass
class Tried:
    """A setting and what it scored: per dataset ``(hit@k, mrr)``, and p50 search ms."""

    setting: Setting
    scores: dict[str, tuple[float, float]]
    p50_ms: float

    @property
    def objective(self) -> float:
        return statistics.mean(hit + mrr for hit, mrr in self.scores.values())


def quick_settings() -> list[Setting]:
    """Each mode at the shipped fusion defaults, hybrid with and without reranking."""
    return [
        Setting("vector"),
        Setting("lexical"),
        Setting("hybrid", DEFAULT_LEXICAL_WEIGHT, DEFAULT_RRF_K),
        Setting("hybrid", DEFAULT_LEXICAL_WEIGHT, DEFAULT_RRF_K, top_n=20),
    ]


def settings_to_try() -> list[Setting]:
    """The grid: vector and lexical alone, hybrid over weights and ``k``, each with every
    ``top_n`` and ``ef_search`` (``ef_search`` only matters where the vector leg runs)."""
    tried = [Setting("vector", top_n=n, ef_search=ef) for n in TOP_NS for ef in EF_SEARCHES]
    tried += [Setting("lexical", top_n=n) for n in TOP_NS]
    tried += [
        Setting("hybrid", weight, k, n, ef)
        for weight, k, n, ef in itertools.product(LEXICAL_WEIGHTS, RRF_KS, TOP_NS, EF_SEARCHES)
    ]
    return tried


def questions_of(slug: str) -> list[tuple[str, dict[str, Any]]]:
    """``(message, expected)`` of the dataset's current items that expect documents."""
    dataset = Dataset.objects.filter(slug=slug).first()
    if dataset is None:
        raise ValueError(f"no dataset with slug {slug!r}")
    items = DatasetItem.objects.filter(dataset=dataset, valid_to__isnull=True).order_by("key")
    found = [
        (item.input["message"], item.expected)
        for item in items
        if isinstance(item.expected, dict) and item.expected.get("documents")
    ]
    if not found:
        raise ValueError(f"dataset {slug!r} has no item with expected.documents")
    return found


def try_settings(
    store: PgVectorStore,
    datasets: dict[str, list[tuple[str, dict[str, Any]]]],
    settings: list[Setting],
    k: int = 5,
) -> list[Tried]:
    """Every setting on every question (each embedded once), best first."""
    hit_at_k, mrr = HitAtKEvaluator("hit", k), MrrEvaluator("mrr", k)
    reranker = Bm25Reranker()
    vectors = {
        name: store._embed([message for message, _ in questions])
        for name, questions in datasets.items()
    }
    results = []
    for setting in settings:
        scores: dict[str, tuple[float, float]] = {}
        times: list[float] = []
        for name, questions in datasets.items():
            hits: list[float] = []
            ranks: list[float] = []
            for (message, expected), vector in zip(questions, vectors[name], strict=True):
                request = SearchRequest(
                    query=message,
                    top_k=max(k, setting.top_n or 0),
                    ef_search=setting.ef_search,
                    search_mode=setting.mode,
                    lexical_weight=setting.lexical_weight,
                    vector_weight=1.0,
                    rrf_k=setting.rrf_k,
                )
                start = time.perf_counter()
                documents = store.search_vector(vector, request).documents
                if setting.top_n is not None:
                    documents = async_to_sync(rerank_top_k)(reranker, message, documents, k)
                times.append((time.perf_counter() - start) * 1000)
                case = EvalCase(
                    input={"message": message},
                    expected=expected,
                    output="",
                    documents=[{"metadata": dict(d.metadata)} for d in documents],
                )
                hits.append(float(async_to_sync(hit_at_k.evaluate)(case).passed or False))
                ranks.append(float(async_to_sync(mrr.evaluate)(case).value))
            scores[name] = (statistics.mean(hits), statistics.mean(ranks))
        results.append(Tried(setting, scores, statistics.median(times)))
    results.sort(key=lambda tried: (-round(tried.objective, 9), tried.p50_ms))
    return results


class Command(BaseCommand):
    help = "Try search modes, fusion weights, reranking and ef_search on datasets; keep the best."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("collection", help="Slug of the collection.")
        parser.add_argument("datasets", nargs="+", help="Dataset slugs (expected.documents).")
        parser.add_argument("--k", type=int, default=5, help="hit@k and MRR within k (5).")
        parser.add_argument("--top", type=int, default=15, help="Rows of the table printed.")
        parser.add_argument("--dry-run", action="store_true", help="Print only.")
        parser.add_argument(
            "--quick",
            action="store_true",
            help="Only each mode at the shipped defaults (4 settings instead of 140).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        collection = Collection.objects.filter(slug=options["collection"]).first()
        if collection is None:
            raise CommandError(f"no collection with slug {options['collection']!r}")
        try:
            datasets = {slug: questions_of(slug) for slug in options["datasets"]}
        except ValueError as error:
            raise CommandError(str(error)) from error
        store = PgVectorStore(collection)
        grid = quick_settings() if options["quick"] else settings_to_try()
        results = try_settings(store, datasets, grid, options["k"])
        names = list(datasets)
        k = options["k"]
        header = "setting".ljust(46) + "".join(f"{n[:24]:>26}" for n in names) + "   p50 ms"
        self.stdout.write(header)
        self.stdout.write(" " * 46 + "".join(f"{f'hit@{k} / mrr':>26}" for _ in names))
        for tried in results[: options["top"]]:
            cells = "".join(
                f"{tried.scores[n][0]:>17.3f} / {tried.scores[n][1]:.3f}" for n in names
            )
            self.stdout.write(f"{tried.setting!s:46}{cells}   {tried.p50_ms:6.1f}")
        best = results[0].setting
        self.stdout.write(f"best: {best}")
        if best.top_n:
            self.stdout.write(
                f'set the retrieval advisors\' param "rerank": {{"top_n": {best.top_n}}}'
            )
        if options["dry_run"]:
            return
        collection.search_mode = best.mode
        collection.ef_search = best.ef_search
        if best.mode == "hybrid":
            collection.vector_weight = 1.0
            collection.lexical_weight = best.lexical_weight
            collection.rrf_k = best.rrf_k
        collection.save()
        self.stdout.write(f"{collection.slug}: defaults written")
