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

__all__ = ["cited_sources"]


def _document(item: Any) -> tuple[Mapping[str, Any], Any]:
    """``(metadata, score)`` of a core ``Document`` or of its JSON form."""
    if isinstance(item, Mapping):
        metadata = item.get("metadata")
        return (metadata if isinstance(metadata, Mapping) else {}), item.get("score")
    return getattr(item, "metadata", {}) or {}, getattr(item, "score", None)


def cited_sources(metadata: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """One ``{"title", "source", "score"}`` per cited source, in retrieval order.

    ``metadata`` is a response's metadata (a ``done`` event's ``metadata``, or
    ``ChatResponseMetadata``). ``title`` is the document's ``title`` metadata, else its
    ``source``; chunks of one source are merged, keeping the best score (cosine similarity,
    or ``None`` when the store gives none). Other metadata keys are ignored; no documents
    gives ``[]``.
    """
    if not metadata:
        return []
    found: dict[str, dict[str, Any]] = {}
    for key in (RETRIEVED_DOCUMENTS, DOCUMENT_CONTEXT):
        documents = metadata.get(key)
        if not isinstance(documents, (list, tuple)):
            continue
        for item in documents:
            meta, score = _document(item)
            source = str(meta.get("source") or meta.get("title") or "")
            if not source:
                continue
            entry = found.setdefault(
                source,
                {"title": str(meta.get("title") or source), "source": source, "score": score},
            )
            if isinstance(score, (int, float)) and (
                entry["score"] is None or score > entry["score"]
            ):
                entry["score"] = score
    return list(found.values())
