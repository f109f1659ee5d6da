"""The demo's evaluation dataset: its 54 retrieval questions in ``dataset_import``'s shape.

:data:`DATASET_FILE` holds the questions of ``questions.json`` (what
:mod:`advisors_app.demo.retrieval` measures hit@k with), one item per question, keyed by the
pydoc topic that answers it (``for-2`` for a topic's second question), each expecting a
retrieved chunk whose ``topic`` metadata is that topic: ``{"documents": {"topic": [...]}}``,
what the ``retrieval_hit_at_k`` and ``mrr`` evaluators read. :func:`ensure_demo_dataset`
imports it as the dataset ``python-docs-questions`` (upsert by key: loading the demo again
changes nothing unless the file changed).
"""

from __future__ import annotations

import json
from pathlib import Path

from advisors_app.evaluation.datasets import ImportReport, import_items, parse_items
from advisors_app.models import Dataset

__all__ = [
    "DATASET",
    "DATASET_FILE",
    "IDENTIFIER_DATASET",
    "IDENTIFIER_DATASET_FILE",
    "ensure_demo_dataset",
]

#: The dataset's slug: the file's name, as ``manage.py dataset_import`` would call it.
DATASET = "python-docs-questions"
DATASET_FILE = Path(__file__).with_name(f"{DATASET}.json")
#: Questions naming an identifier as written (``__aenter__``, ``str.casefold``), each judged
#: by the chunk that holds it (``metadata["identifiers"]``, :mod:`advisors_app.demo.chunking`).
IDENTIFIER_DATASET = "python-docs-identifier-questions"
IDENTIFIER_DATASET_FILE = Path(__file__).with_name(f"{IDENTIFIER_DATASET}.json")


def _ensure(slug: str, path: Path) -> ImportReport:
    data = json.loads(path.read_text(encoding="utf-8"))
    dataset, _ = Dataset.objects.get_or_create(
        slug=slug, defaults={"name": data["name"], "description": data["description"]}
    )
    return import_items(dataset, parse_items(data))


def ensure_demo_dataset() -> ImportReport:
    """Create or update the dataset :data:`DATASET` from :data:`DATASET_FILE`, and the
    identifier questions :data:`IDENTIFIER_DATASET` (blocking); the first one's report."""
    _ensure(IDENTIFIER_DATASET, IDENTIFIER_DATASET_FILE)
    return _ensure(DATASET, DATASET_FILE)
