"""The sources a turn cites: where they come from, decided in one place (:class:`TurnSources`).

Retrieval advisors put their documents in the request context as soon as they have run, and in
the response metadata (``QuestionAnswerAdvisor``: ``qa_retrieved_documents``;
``RetrievalAugmentationAdvisor``: ``rag_document_context``), which a stream gets only with its
last chunk and a turn's ``done`` event carries as JSON. :func:`cited_sources` reduces them to one
entry per source document, for a terminal, a chat page or an API client.

A turn's sources are those retrieval left where the turn first sees them — the request that
reaches the model (before its first round: a stream sends them before that round's tool events),
the first chunk of text, or the final response — ``[]`` when retrieval ran and found nothing;
a turn through no retrieval has none to send. A stream sends them once, in a ``sources`` event
before what follows; the outcome names what the final response cites, else what was sent (a
turn cut short has no final metadata).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisors_app.core.advisors.question_answer import RETRIEVED_DOCUMENTS
from advisors_app.core.guards.rails import GUARD_DROPPED
from advisors_app.core.rag.advisor import DOCUMENT_CONTEXT
from advisors_app.core.vectorstore.document import RETRIEVAL

__all__ = ["RETRIEVAL_KEYS", "TurnSources", "cited_sources"]

#: Where the retrieval advisors leave what they found (a list, empty when nothing matched).
RETRIEVAL_KEYS = (RETRIEVED_DOCUMENTS, DOCUMENT_CONTEXT)


#: Characters of a cited chunk's text kept as its snippet.
SNIPPET_CHARS = 240


def _document(item: Any) -> tuple[Mapping[str, Any], Any, Any, Any]:
    """``(metadata, score, id, text)`` of a core ``Document`` or of its JSON form."""
    if isinstance(item, Mapping):
        metadata = item.get("metadata")
        return (
            metadata if isinstance(metadata, Mapping) else {},
            item.get("score"),
            item.get("id"),
            item.get("text"),
        )
    return (
        getattr(item, "metadata", {}) or {},
        getattr(item, "score", None),
        getattr(item, "id", None),
        getattr(item, "text", None),
    )


#: What a search records of how it found a chunk, as a cited source shows it.
RETRIEVAL_FIELDS = ("mode", "vector_rank", "lexical_rank", "fused_score", "rerank_score")


def _how_found(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The chunk's ``retrieval`` record (which leg found it and at what rank, the fused and
    rerank scores) limited to :data:`RETRIEVAL_FIELDS`; ``None`` from a store that keeps none."""
    how = metadata.get(RETRIEVAL)
    if not isinstance(how, Mapping):
        return None
    return {field: how[field] for field in RETRIEVAL_FIELDS if field in how}


def _better(score: Any, than: Any) -> bool:
    return isinstance(score, (int, float)) and (than is None or score > than)


def cited_sources(metadata: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One ``{"document_id", "title", "source", "score", "snippet", "retrieval"}`` per cited
    source, in retrieval order.

    ``metadata`` is a response's metadata (a ``done`` event's ``metadata``, or
    ``ChatResponseMetadata``). ``title`` is the document's ``title`` metadata, else its
    ``source``; chunks of one source are merged, keeping the best score (cosine similarity,
    or ``None`` when the store gives none) with that chunk's id, the start of its text
    (``SNIPPET_CHARS``) and how the search found it (``retrieval``: ``mode``, ``vector_rank``,
    ``lexical_rank``, ``fused_score``, ``rerank_score`` as far as they apply; ``None`` from a
    store that records none). Documents a guard dropped (metadata ``guard_dropped``) are left
    out: the model never read them. Other metadata keys are ignored; no documents gives ``[]``.
    """
    if not metadata:
        return []
    found: dict[str, dict[str, Any]] = {}
    for key in RETRIEVAL_KEYS:
        documents = metadata.get(key)
        if not isinstance(documents, (list, tuple)):
            continue
        for item in documents:
            meta, score, document_id, text = _document(item)
            if meta.get(GUARD_DROPPED):
                continue  # withheld from the model: the answer cannot cite it
            source = str(meta.get("source") or meta.get("title") or "")
            if not source:
                continue
            entry = found.get(source)
            if entry is None:
                entry = found[source] = {
                    "document_id": None,
                    "title": str(meta.get("title") or source),
                    "source": source,
                    "score": None,
                    "snippet": "",
                    "retrieval": None,
                }
            elif not _better(score, entry["score"]):
                continue
            entry["document_id"] = None if document_id is None else str(document_id)
            entry["score"] = score if isinstance(score, (int, float)) else None
            entry["snippet"] = text[:SNIPPET_CHARS] if isinstance(text, str) else ""
            entry["retrieval"] = _how_found(meta)
    return list(found.values())


class TurnSources:
    """The sources of one turn (see the module docstring): :meth:`note` what a request, a
    chunk or a response carries, :meth:`take_unsent` them once for a ``sources`` event, and
    read the outcome's with :meth:`of_outcome`."""

    __slots__ = ("_sent", "found")

    def __init__(self) -> None:
        #: What retrieval found (``None``: no retrieval seen yet).
        self.found: list[dict[str, Any]] | None = None
        self._sent = False

    def note(self, context: Mapping[str, Any], metadata: Mapping[str, Any] | None = None) -> None:
        """Take the sources of ``context`` (a request's or a chunk's), else of ``metadata`` (a
        response's), if retrieval has run and none were taken yet."""
        if self.found is not None:
            return
        found = cited_sources(context) or cited_sources(metadata)
        if found or any(key in context for key in RETRIEVAL_KEYS):
            self.found = found

    def take_unsent(self) -> list[dict[str, Any]] | None:
        """The sources if found and not sent yet (then they count as sent), else ``None``."""
        if self.found is None or self._sent:
            return None
        self._sent = True
        return self.found

    def of_outcome(self, metadata: Mapping[str, Any] | None) -> list[dict[str, Any]]:
        """The outcome's sources: what the final response ``metadata`` cites, else those
        found during the turn."""
        return cited_sources(metadata) or list(self.found or ())
