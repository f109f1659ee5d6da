"""Ingestion into a collection: read, split, embed in batches, store; idempotent per source.

The one service every transport uses: :func:`ingest_text`, :func:`ingest_bytes`,
:func:`ingest_file` here for callers that wait (the synchronous ``ingest`` command, code), and
:mod:`advisors_app.ingestion.jobs` for uploads, which a task worker runs through
:func:`ingest_sources`. Re-ingesting a source (by its name) embeds only chunks whose text is
new, keeps the unchanged ones, and removes the chunks of the previous version that are gone, so
running it twice changes nothing. Files are read within the limits of
:mod:`advisors_app.ingestion.parsing`; embedding happens before anything is written, and all the
sources
of one call are then stored in one transaction. Functions are synchronous (ORM and embedding on
the calling thread); call them through ``asgiref.sync.sync_to_async`` from async code.

**Contextual chunks**: each chunk gets a context line (:func:`default_context`: the document's
title, else its source name, then its heading path), stored in the row's ``context`` apart
from the text users see, and embedded and indexed with it (:func:`embedding_text`, and the
lexical index of :func:`~advisors_app.models.documents.lexical_vector`). A chunk whose context
changed counts as new. ``contextualizer`` replaces the default, e.g. with a model-written
sentence (none is shipped: a model call per chunk would also need metering).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import QuerySet

from advisors_app.core._sync import run_sync
from advisors_app.core.ingestion import TokenTextSplitter, read_text
from advisors_app.core.model import EmbeddingModel
from advisors_app.core.vectorstore import Document, EmbeddingDimensionError
from advisors_app.core.vectorstore.base import check_documents
from advisors_app.ingestion.parsing import CpuBudget, LimitExceeded, Limits, read_upload
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow
from advisors_app.models.documents import content_hash, lexical_vector
from advisors_app.stores.vectors import PgVectorStore

__all__ = [
    "Contextualizer",
    "IngestResult",
    "default_context",
    "embedding_text",
    "ingest_bytes",
    "ingest_documents",
    "ingest_file",
    "ingest_sources",
    "ingest_text",
]

DEFAULT_BATCH_SIZE = 64

#: ``progress(done, total)``: chunks embedded so far and to embed in all, for one source.
Progress = Callable[[int, int], None]
#: ``contextualizer(chunk)``: the chunk's context line ("" for none).
Contextualizer = Callable[[Document], str]

#: Between the parts of a context line: title › heading › subheading.
CONTEXT_SEPARATOR = " › "


def default_context(chunk: Document) -> str:
    """A chunk's context line: its ``title`` (else its ``source``), then its heading path —
    ``metadata["headings"]`` (a list) or the Markdown reader's ``section`` — joined by
    ``" › "``, each part once."""
    metadata = chunk.metadata
    headings = metadata.get("headings")
    if not isinstance(headings, list):
        section = metadata.get("section")
        headings = [section] if section else []
    parts: list[str] = []
    for part in [metadata.get("title") or metadata.get("source"), *headings]:
        text = " ".join(str(part or "").split())
        if text and text not in parts:
            parts.append(text)
    return CONTEXT_SEPARATOR.join(parts)


def embedding_text(context: str, text: str) -> str:
    """What is embedded for a chunk: its context line, a blank line, its text."""
    return f"{context}\n\n{text}" if context else text


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


@dataclass(slots=True)
class _Source:
    """One source's plan: its chunks by content hash, their context lines, and those not
    stored yet (or stored with another context)."""

    name: str
    chunks: dict[str, Document]
    contexts: dict[str, str]
    new: list[str]


def _embed(model: EmbeddingModel, texts: list[str], dimensions: int) -> list[list[float]]:
    embed_sync = getattr(model, "embed_sync", None)
    vectors = list(embed_sync(texts)) if embed_sync else run_sync(model.embed(texts))
    for vector in vectors:
        if len(vector) != dimensions:
            raise EmbeddingDimensionError(len(vector), dimensions)
    return [[float(v) for v in vector] for vector in vectors]


def _owner_id(owner: Any) -> Any:
    return owner.pk if getattr(owner, "is_authenticated", False) else None


def _rows_of(target: Collection, owner: Any, tenant: str | None, source: str) -> QuerySet[Any]:
    return DocumentRow.objects.filter(
        collection=target, source=source, tenant=tenant or "", owner=_owner_id(owner)
    )


def _check_quota(target: Collection, owner: Any, plans: list[_Source], max_chunks: int) -> None:
    """Raise :class:`LimitExceeded` when ``owner`` would hold more than ``max_chunks`` chunks
    in ``target`` once the plans are stored (0: no quota; shared chunks have none)."""
    if not max_chunks or _owner_id(owner) is None:
        return
    held = DocumentRow.objects.filter(collection=target, owner=_owner_id(owner))
    replaced = held.filter(source__in=[plan.name for plan in plans]).count()
    after = held.count() - replaced + sum(len(plan.chunks) for plan in plans)
    if after > max_chunks:
        raise LimitExceeded(
            f"{target.slug} would hold {after} of your chunks, more than {max_chunks}",
            "MAX_CHUNKS_PER_COLLECTION",
        )


def ingest_sources(
    collection: Collection | str,
    sources: Sequence[tuple[str, Sequence[Document]]],
    *,
    metadata: Mapping[str, Any] | None = None,
    owner: Any = None,
    tenant: str | None = None,
    embedding_model: EmbeddingModel | None = None,
    splitter: TokenTextSplitter | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    progress: Progress | None = None,
    budget: CpuBudget | None = None,
    max_chunks: int = 0,
    on_stored: Callable[[list[IngestResult]], None] | None = None,
    contextualizer: Contextualizer | None = default_context,
) -> list[IngestResult]:
    """Split ``(source name, documents already read)`` pairs and store them as chunks.

    Three steps: split every source and find the chunks not stored yet; embed those in
    batches of ``batch_size`` (``progress(done, total)`` before the first and after each;
    ``budget`` checked after each); then, in one transaction with the collection row locked,
    add the new chunks, remove each source's chunks that are gone, and call ``on_stored``
    with the results. So the sources are stored all or none, and a failure while reading or
    embedding leaves the collection as it was. ``metadata`` is added to every chunk (the
    reader's keys and ``source`` win); ``owner`` (a user) makes the chunks private to that
    user; ``tenant`` labels them; ``max_chunks`` (0: none) caps the owner's chunks in the
    collection afterwards; ``contextualizer`` gives each chunk its context line (``None``:
    none). Raises ``ValueError`` for an unknown collection, a blank source,
    :class:`~advisors_app.ingestion.parsing.LimitExceeded` over the budget or the quota, and
    :class:`~advisors_app.core.vectorstore.EmbeddingDimensionError` when the embedding model
    does not fit the column (before anything is embedded).
    """
    for name, _ in sources:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("source (the document name) cannot be empty")
    if batch_size < 1:
        raise ValueError("batch_size must be greater than 0")
    target = _collection(collection)
    store = PgVectorStore(target, embedding_model, owner=owner, tenant=tenant)  # checks dimensions
    splitter = splitter or TokenTextSplitter()
    plans: list[_Source] = []
    for name, documents in sources:
        chunks: dict[str, Document] = {}
        for chunk in splitter.split(check_documents(documents)):
            chunks.setdefault(
                content_hash(chunk.text),
                chunk.mutate(metadata={**(metadata or {}), **chunk.metadata, "source": name}),
            )
        contexts = {
            digest: contextualizer(chunk) if contextualizer else ""
            for digest, chunk in chunks.items()
        }
        stored = dict(_rows_of(target, owner, tenant, name).values_list("content_hash", "context"))
        new = [digest for digest in chunks if stored.get(digest) != contexts[digest]]
        plans.append(_Source(name, chunks, contexts, new))
    if budget is not None:
        budget.check("splitting")
    _check_quota(target, owner, plans, max_chunks)  # early: before the costly part

    pending = [(plan, digest) for plan in plans for digest in plan.new]
    vectors: dict[tuple[str, str], list[float]] = {}
    if progress is not None and pending:
        progress(0, len(pending))
    for start in range(0, len(pending), batch_size):
        batch = pending[start : start + batch_size]
        texts = [
            embedding_text(plan.contexts[digest], plan.chunks[digest].text)
            for plan, digest in batch
        ]
        for (plan, digest), vector in zip(
            batch, _embed(store.embedding_model, texts, store.dimensions), strict=True
        ):
            vectors[plan.name, digest] = vector
        if budget is not None:
            budget.check("embedding")
        if progress is not None:
            progress(min(start + batch_size, len(pending)), len(pending))

    with transaction.atomic():
        Collection.objects.select_for_update().filter(pk=target.pk).first()
        _check_quota(target, owner, plans, max_chunks)
        results = [_store(target, owner, tenant, plan, vectors) for plan in plans]
        if on_stored is not None:
            on_stored(results)
    return results


def _store(
    target: Collection,
    owner: Any,
    tenant: str | None,
    plan: _Source,
    vectors: Mapping[tuple[str, str], list[float]],
) -> IngestResult:
    # Read again under the lock: a job for the same source may have finished meanwhile.
    rows = _rows_of(target, owner, tenant, plan.name)
    stored: dict[str, Any] = {}
    replaced = []
    for digest, pk, context in rows.values_list("content_hash", "pk", "context"):
        changed = digest in plan.contexts and context != plan.contexts[digest]
        if changed and (plan.name, digest) in vectors:
            replaced.append(pk)  # a new context line: the row is written again
            continue
        stored[digest] = pk
    if replaced:
        rows.filter(pk__in=replaced).delete()
    config = target.text_search_config
    added = [
        DocumentRow(
            id=chunk.id,
            collection=target,
            owner_id=_owner_id(owner),
            tenant=tenant or "",
            source=plan.name,
            content=chunk.text,
            context=plan.contexts[digest],
            metadata=dict(chunk.metadata),
            content_hash=digest,
            embedding=vectors[plan.name, digest],
            search_vector=lexical_vector(config, chunk.text, plan.contexts[digest]),
        )
        for digest, chunk in plan.chunks.items()
        if digest not in stored and (plan.name, digest) in vectors
    ]
    DocumentRow.objects.bulk_create(added, ignore_conflicts=True)
    stale = [pk for digest, pk in stored.items() if digest not in plan.chunks]
    if stale:
        rows.filter(pk__in=stale).delete()
    return IngestResult(
        source=plan.name,
        chunks=len(plan.chunks),
        added=len(plan.new),
        unchanged=len(plan.chunks) - len(plan.new),
        removed=len(stale),
    )


def ingest_documents(
    collection: Collection | str,
    source: str,
    documents: Sequence[Document],
    **options: Any,
) -> IngestResult:
    """Split ``documents`` (already read) and store them as the chunks of ``source``.

    The options are those of :func:`ingest_sources` (``metadata``, ``owner``, ``tenant``,
    ``embedding_model``, ``splitter``, ``batch_size``, ``progress``, ...).
    """
    [result] = ingest_sources(collection, [(source, documents)], **options)
    return result


def ingest_text(
    collection: Collection | str,
    name: str,
    text: str,
    metadata: Mapping[str, Any] | None = None,
    owner: Any = None,
    **options: Any,
) -> IngestResult:
    """Ingest plain ``text`` as the source ``name`` (see :func:`ingest_sources`)."""
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
    *,
    limits: Limits | None = None,
    **options: Any,
) -> IngestResult:
    """Ingest an uploaded file: the reader is chosen by ``name``'s suffix or ``content_type``.

    Supported: ``.txt``, ``.md``, ``.html``, ``.pdf`` (and their content types); anything else
    raises ``ValueError`` naming them (an HTTP 400 for an upload). Reading and embedding stay
    within ``limits`` (default: the settings', :func:`advisors_app.ingestion.parsing.read_upload`),
    one
    CPU budget for the whole file.
    """
    limits = limits or Limits.from_settings()
    budget = options.pop("budget", None) or CpuBudget(limits.cpu_seconds)
    documents = read_upload(data, name, content_type, limits=limits, budget=budget)
    return ingest_documents(
        collection,
        name,
        documents,
        metadata=metadata,
        owner=owner,
        budget=budget,
        max_chunks=limits.max_chunks,
        **options,
    )


def ingest_file(
    collection: Collection | str, path: str | Path, name: str | None = None, **options: Any
) -> IngestResult:
    """Ingest the file at ``path`` as the source ``name`` (default: the file name)."""
    path = Path(path)
    return ingest_bytes(collection, name or path.name, path.read_bytes(), **options)
