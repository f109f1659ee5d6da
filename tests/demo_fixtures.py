"""Fixtures for tests on the real demo collection, embedded once per test session.

``demo_snapshot`` runs the real ``load_demo`` once (about 550 chunks through MiniLM: a minute
or more on two cores), keeps the collection's rows in memory and removes the demo from the
database again, so tests that expect an empty database are unaffected. The rows are also kept
in pytest's cache under the collection's build id (a hash of the corpus and the chunking), so
later sessions on the same corpus skip the embedding; ``--cache-clear`` forces it.

``demo`` puts the demo back for one test: its rows through ``ensure_demo_rows`` and the
stored chunks, embeddings included, without embedding anything; transactional tests flush it
afterwards, the others roll it back.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import pytest

from advisors_app.definition.runtime import clear_cache
from advisors_app.demo import loader
from advisors_app.demo.corpus import python_reference_topics
from advisors_app.demo.dataset import DATASET as DEMO_DATASET
from advisors_app.demo.dataset import IDENTIFIER_DATASET
from advisors_app.demo.loader import DemoReport, build_id, ensure_demo_rows, load_demo
from advisors_app.models import (
    AdvisorChain,
    ChatModelConfig,
    Collection,
    Dataset,
    Document,
    EmbeddingModelConfig,
    PromptTemplate,
    SensitiveWordList,
)
from advisors_app.models.documents import lexical_vector

__all__ = ["DemoSnapshot", "demo", "demo_snapshot", "remove_demo"]


@dataclass(frozen=True)
class DemoSnapshot:
    """The first ``load_demo`` run's report, and the collection it built."""

    report: DemoReport
    description: str
    documents: list[dict[str, Any]]


def remove_demo() -> None:
    """Delete every row ``load_demo`` creates."""
    AdvisorChain.objects.filter(
        slug__in=[loader.MAIN_CHAIN, loader.JSON_CHAIN, loader.NOTES_CHAIN]
    ).delete()
    Collection.objects.filter(slug=loader.COLLECTION).delete()
    PromptTemplate.objects.filter(slug__startswith="python-docs").delete()
    SensitiveWordList.objects.filter(slug=loader.WORD_LIST).delete()
    ChatModelConfig.objects.filter(slug__in=[loader.CHAT_MODEL, loader.NOTES_MODEL]).delete()
    EmbeddingModelConfig.objects.filter(slug=loader.EMBEDDING_MODEL).delete()
    Dataset.objects.filter(slug__in=[DEMO_DATASET, IDENTIFIER_DATASET]).delete()


@pytest.fixture(scope="session")
def demo_snapshot(
    django_db_setup: None, django_db_blocker: Any, pytestconfig: pytest.Config
) -> DemoSnapshot:
    key = f"advisors_app/demo-{build_id(python_reference_topics())}"
    cache = getattr(pytestconfig, "cache", None)  # None with -p no:cacheprovider
    cached = cache.get(key, None) if cache is not None else None
    if cached is not None:
        return DemoSnapshot(DemoReport(**cached["report"]), cached["description"], cached["rows"])
    with django_db_blocker.unblock():
        report = load_demo()
        collection = Collection.objects.get(slug=loader.COLLECTION)
        rows = [
            {**row, "embedding": [float(v) for v in row["embedding"]]}
            for row in collection.documents.values(
                "id", "source", "content", "context", "metadata", "content_hash", "embedding"
            )
        ]
        remove_demo()
    snapshot = DemoSnapshot(report, collection.description, rows)
    if cache is not None:
        cache.set(
            key, {"report": asdict(report), "description": snapshot.description, "rows": rows}
        )
    return snapshot


@pytest.fixture
def demo(demo_snapshot: DemoSnapshot) -> Iterator[Collection]:
    """The demo as ``load_demo`` leaves it (needs the ``db`` or ``transactional_db`` fixture)."""
    clear_cache()
    collection = ensure_demo_rows()
    if not collection.documents.exists():
        config = collection.text_search_config
        Document.objects.bulk_create(
            Document(
                collection=collection,
                search_vector=lexical_vector(config, row["content"], row["context"]),
                **row,
            )
            for row in demo_snapshot.documents
        )
        collection.description = demo_snapshot.description
        collection.save()
    yield collection
    clear_cache()
