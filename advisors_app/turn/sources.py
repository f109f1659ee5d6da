"""The sources a turn cited: the retrieved documents of its response metadata, for display.

Retrieval advisors put their documents in the response metadata
(``QuestionAnswerAdvisor``: ``qa_retrieved_documents``; ``RetrievalAugmentationAdvisor``:
``rag_document_context``), which a turn's ``done`` event carries as JSON. :func:`cited_sources`
reduces them to one entry per source document, for a terminal, a chat page or an API client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisors_app.core.advisors.question_answer import RETRIEVED_DOCUMENTS
from advisors_app.core.rag.advisor import DOCUMENT_CONTEXT

__all__ = ["RETRIEVAL_KEYS", "cited_sources"]

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


def _better(score: Any, than: Any) -> bool:
    return isinstance(score, (int, float)) and (than is None or score > than)


def cited_sources(metadata: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One ``{"document_id", "title", "source", "score", "snippet"}`` per cited source, in
    retrieval order.

    ``metadata`` is a response's metadata (a ``done`` event's ``metadata``, or
    ``ChatResponseMetadata``). ``title`` is the document's ``title`` metadata, else its
    ``source``; chunks of one source are merged, keeping the best score (cosine similarity,
    or ``None`` when the store gives none) with that chunk's id and the start of its text
    (``SNIPPET_CHARS``). Other metadata keys are ignored; no documents gives ``[]``.
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
                }
            elif not _better(score, entry["score"]):
                continue
            entry["document_id"] = None if document_id is None else str(document_id)
            entry["score"] = score if isinstance(score, (int, float)) else None
            entry["snippet"] = text[:SNIPPET_CHARS] if isinstance(text, str) else ""
    return list(found.values())
