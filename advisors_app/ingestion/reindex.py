"""Rebuild a collection's two indexes: embeddings (with context lines) and the lexical index.

After a change that the stored rows do not follow by themselves — another text search
configuration for the collection, a new default context line, a new embedding of the same
size — :func:`reindex_collection` rewrites every chunk of the collection from its stored text,
in batches of ``batch_size`` (each batch one transaction), and leaves the text users see as
it is. ``manage.py reindex COLLECTION`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db import transaction

from advisors_app.core.model import EmbeddingModel
from advisors_app.core.vectorstore import Document
from advisors_app.ingestion.pipeline import (
    DEFAULT_BATCH_SIZE,
    Contextualizer,
    default_context,
    embedding_text,
)
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.models.documents import lexical_vector
from advisors_app.stores.vectors import PgVectorStore

__all__ = ["ReindexResult", "reindex_collection"]


@dataclass(frozen=True, slots=True)
class ReindexResult:
    """What :func:`reindex_collection` did: chunks rewritten, contexts changed, re-embedded."""

    chunks: int
    contexts_changed: int
    embedded: int

    def __str__(self) -> str:
        return (
            f"{self.chunks} chunks reindexed ({self.contexts_changed} new context lines, "
            f"{self.embedded} embedded)"
        )


def reindex_collection(
    collection: Collection | str,
    *,
    embedding_model: EmbeddingModel | None = None,
    lexical_only: bool = False,
    contextualizer: Contextualizer | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Callable[[int, int], None] | None = None,
) -> ReindexResult:
    """Rewrite the lexical index (in the collection's ``text_search_config``) and, unless
    ``lexical_only``, the embedding of every chunk of ``collection``.

    ``contextualizer`` (e.g. :func:`~advisors_app.ingestion.pipeline.default_context`) first
    gives each chunk a new context line from its metadata; ``None`` keeps the stored ones.
    ``progress(done, total)`` is called after each batch. Raises ``ValueError`` for an
    unknown collection and ``EmbeddingDimensionError`` for a model that does not fit.
    """
    if isinstance(collection, str):
        found = Collection.objects.filter(slug=collection).first()
        if found is None:
            raise ValueError(f"no collection with slug {collection!r}")
        collection = found
    store = None if lexical_only else PgVectorStore(collection, embedding_model)
    rows = DocumentRow.objects.filter(collection=collection).order_by("pk")
    total = rows.count()
    done = changed = embedded = 0
    last = ""
    while True:
        batch = list(
            rows.filter(pk__gt=last).values_list("pk", "content", "context", "metadata")[
                :batch_size
            ]
        )
        if not batch:
            break
        last = batch[-1][0]
        contexts = {}
        for pk, content, context, metadata in batch:
            new = contextualizer(Document(content, metadata)) if contextualizer else context
            changed += new != context
            contexts[pk] = new
        vectors: dict[str, list[float]] = {}
        if store is not None:
            texts = [embedding_text(contexts[pk], content) for pk, content, _, _ in batch]
            vectors = dict(zip([row[0] for row in batch], store._embed(texts), strict=True))
            embedded += len(vectors)
        rows_of_batch = []
        for pk, content, _, _ in batch:
            row = DocumentRow(
                pk=pk,
                context=contexts[pk],
                search_vector=lexical_vector(collection.text_search_config, content, contexts[pk]),
            )
            if pk in vectors:
                row.embedding = vectors[pk]
            rows_of_batch.append(row)
        fields = ["context", "search_vector"] + (["embedding"] if vectors else [])
        with transaction.atomic():
            DocumentRow.objects.bulk_update(rows_of_batch, fields)
        done += len(batch)
        if progress is not None:
            progress(done, total)
    return ReindexResult(done, changed, embedded)


#: What ``manage.py reindex --context`` recomputes context lines with.
DEFAULT_CONTEXTUALIZER = default_context
