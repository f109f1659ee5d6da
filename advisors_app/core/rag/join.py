"""Joining the documents retrieved for several queries (``ConcatenationDocumentJoiner``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..vectorstore import Document
from .query import Query

__all__ = ["ConcatenationDocumentJoiner", "DocumentJoiner", "QueryResults"]

#: ``[(query, documents), ...]`` in query order, or a mapping from query to documents.
QueryResults = Sequence[tuple[Query, Sequence[Any]]] | Mapping[Query, Sequence[Any]]


class DocumentJoiner:
    """Merges per-query results into one list: ``join(documents_for_query)``."""

    __slots__ = ()

    def join(self, documents_for_query: QueryResults) -> list[Document]:
        raise NotImplementedError


def _flatten(documents: Iterable[Any]) -> Iterable[Document]:
    for item in documents:
        if item is None:
            raise ValueError("documentsForQuery cannot contain null values")
        if isinstance(item, Document):
            yield item
        else:
            # Spring's shape is query -> list of lists (one list per data source).
            yield from _flatten(item)


class ConcatenationDocumentJoiner(DocumentJoiner):
    """Concatenates all results, keeps the first document of each id, sorts by score.

    Sorting is by descending ``score`` (``None`` counts as 0.0) and **stable**: equal scores
    keep query order, then rank within the query (divergence: Spring's order for equal scores
    follows hash-map iteration, defect 5.6.41). Takes ``[(query, documents), ...]`` (so two
    equal queries never collide, defect 5.6.40) or a mapping; each value is a list of
    documents or a list of such lists. Raises ``ValueError`` with Spring's messages for
    ``None`` input, keys or values.
    """

    __slots__ = ()

    def join(self, documents_for_query: QueryResults) -> list[Document]:
        if documents_for_query is None:
            raise ValueError("documentsForQuery cannot be null")
        pairs = (
            list(documents_for_query.items())
            if isinstance(documents_for_query, Mapping)
            else list(documents_for_query)
        )
        seen: set[str] = set()
        joined: list[Document] = []
        for query, documents in pairs:
            if query is None:
                raise ValueError("documentsForQuery cannot contain null keys")
            if documents is None:
                raise ValueError("documentsForQuery cannot contain null values")
            for document in _flatten(documents):
                if document.id not in seen:
                    seen.add(document.id)
                    joined.append(document)
        joined.sort(key=lambda d: -(d.score if d.score is not None else 0.0))
        return joined
