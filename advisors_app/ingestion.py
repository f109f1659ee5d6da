"""Ingestion into a collection: read, split, embed in batches, store; idempotent per source.

The one service every transport calls (the ``ingest`` management command, REST upload, the
admin): :func:`ingest_text`, :func:`ingest_bytes`, :func:`ingest_file`. Re-ingesting a source
(by its name) embeds only chunks whose text is new, keeps the unchanged ones, and removes the
chunks of the previous version that are gone, so running it twice changes nothing. Functions
are synchronous (ORM and embedding on the calling thread); call them through
``asgiref.sync.sync_to_async`` from async code.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db.models import Q

from advisors_app.core.ingestion import TokenTextSplitter, read_document, read_text
from advisors_app.core.model import EmbeddingModel
from advisors_app.core.vectorstore import Document
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.models.documents import content_hash
from advisors_app.stores.vectors import PgVectorStore

__all__ = ["IngestResult", "ingest_bytes", "ingest_documents", "ingest_file", "ingest_text"]

DEFAULT_BATCH_SIZE = 64

#: ``progress(done, total)``: chunks embedded so far and to embed in all, for one source.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class IngestResult:
    """What one ingestion did to one source: chunk counts after, added, kept and removed."""

    source: str
    chunks: int
    added: int
    unchanged: int
    removed: int

    def __str__(self) -> str:
        return (
            f"{self.source}: {self.chunks} chunks ({self.added} added, "
            f"{self.unchanged} unchanged, {self.removed} removed)"
        )


def _collection(collection: Collection | str) -> Collection:
    if isinstance(collection, Collection):
        return collection
    try:
        return Collection.objects.get(slug=collection)
    except Collection.DoesNotExist:
        raise ValueError(f"no collection with slug {collection!r}") from None


def ingest_documents(
    collection: Collection | str,
    source: str,
    documents: Sequence[Document],
    *,
    metadata: Mapping[str, Any] | None = None,
    owner: Any = None,
    tenant: str | None = None,
    embedding_model: EmbeddingModel | None = None,
    splitter: TokenTextSplitter | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
) -> IngestResult:
    """Split ``documents`` (already read) and store them as the chunks of ``source``.

    ``metadata`` is added to every chunk (the reader's keys and ``source`` win). ``owner``
    (a user) makes the chunks private to that user; ``tenant`` labels them. Raises
    ``ValueError`` for an unknown collection or a blank source, and
    :class:`~advisors_app.core.vectorstore.EmbeddingDimensionError` when the embedding model
    does not fit the column (before anything is stored).
    """
    if not isinstance(source, str) or not source.strip():
        raise ValueError("source (the document name) cannot be empty")
    if batch_size < 1:
        raise ValueError("batch_size must be greater than 0")
    target = _collection(collection)
    store = PgVectorStore(target, embedding_model, owner=owner, tenant=tenant)
    chunks: dict[str, Document] = {}
    for chunk in (splitter or TokenTextSplitter()).split(documents):
        chunks.setdefault(
            content_hash(chunk.text),
            chunk.mutate(metadata={**(metadata or {}), **chunk.metadata, "source": source}),
        )
    rows = DocumentRow.objects.filter(
        collection=target,
        source=source,
        tenant=tenant or "",
        owner=owner if getattr(owner, "is_authenticated", False) else None,
    )
    stored = dict(rows.values_list("content_hash", "pk"))
    new = [chunk for digest, chunk in chunks.items() if digest not in stored]
    for start in range(0, len(new), batch_size):
        store.add(new[start : start + batch_size])
        if progress is not None:
            progress(min(start + batch_size, len(new)), len(new))
    stale = [pk for digest, pk in stored.items() if digest not in chunks]
    if stale:
        rows.filter(Q(pk__in=stale)).delete()
    return IngestResult(
        source=source,
        chunks=len(chunks),
        added=len(new),
        unchanged=len(chunks) - len(new),
        removed=len(stale),
    )


def ingest_text(
    collection: Collection | str,
    name: str,
    text: str,
    metadata: Mapping[str, Any] | None = None,
    owner: Any = None,
    **options: Any,
) -> IngestResult:
    """Ingest plain ``text`` as the source ``name`` (see :func:`ingest_documents`)."""
    return ingest_documents(
        collection, name, read_text(text, name), metadata=metadata, owner=owner, **options
    )


def ingest_bytes(
    collection: Collection | str,
    name: str,
    data: bytes,
    content_type: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    owner: Any = None,
    **options: Any,
) -> IngestResult:
    """Ingest an uploaded file: the reader is chosen by ``name``'s suffix or ``content_type``.

    Supported: ``.txt``, ``.md``, ``.html``, ``.pdf`` (and their content types); anything else
    raises ``ValueError`` naming them (an HTTP 400 for an upload).
    """
    documents = read_document(data, name, content_type)
    return ingest_documents(collection, name, documents, metadata=metadata, owner=owner, **options)


def ingest_file(
    collection: Collection | str, path: str | Path, name: str | None = None, **options: Any
) -> IngestResult:
    """Ingest the file at ``path`` as the source ``name`` (default: the file name)."""
    path = Path(path)
    return ingest_bytes(collection, name or path.name, path.read_bytes(), **options)
