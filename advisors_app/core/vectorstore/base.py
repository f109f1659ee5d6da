"""The ``VectorStore`` contract (Spring AI ``VectorStore``), async-first with sync twins."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._sync import run_sync
from .document import Document
from .filters import Filter
from .parser import resolve_filter
from .search import SearchRequest

__all__ = [
    "EmbeddingDimensionError",
    "VectorStore",
    "as_search_request",
    "check_documents",
    "split_delete_target",
    "store_for_context",
]


class EmbeddingDimensionError(ValueError):
    """Raised when an embedding's length differs from what the store holds (bug case B24).

    ``actual`` and ``expected`` are the two dimension counts; the message names both and the fix.
    """

    def __init__(self, actual: int, expected: int) -> None:
        super().__init__(
            f"embedding has {actual} dimensions but the vector store holds {expected}-dimensional "
            f"vectors; use an embedding model with {expected} dimensions, or re-create the "
            "store (a new column size and migration) for the new model"
        )
        self.actual = actual
        self.expected = expected


def as_search_request(request: SearchRequest | str) -> SearchRequest:
    """``request`` itself, or a default request for query text (Spring's convenience)."""
    if isinstance(request, SearchRequest):
        return request
    if isinstance(request, str):
        return SearchRequest(query=request)
    raise ValueError(f"expected a SearchRequest or query text, got {type(request).__name__}")


def split_delete_target(target: Any) -> tuple[list[str] | None, Filter | None]:
    """``(ids, None)`` for a list of ids, ``(None, filter)`` for a filter or filter text.

    Raises ``ValueError`` for anything else, blank filter text included (deleting everything
    must be explicit: use ``IsNotNull`` on a key every document has, or clear the collection).
    """
    if isinstance(target, (Filter, str)):
        expression = resolve_filter(target, "delete filter")
        if expression is None:
            raise ValueError("delete filter cannot be null or empty")
        return None, expression
    if isinstance(target, Sequence) or hasattr(target, "__iter__"):
        ids = list(target)
        if any(not isinstance(i, str) or not i for i in ids):
            raise ValueError("document ids must be non-empty strings")
        return ids, None
    raise ValueError(f"delete takes a list of ids or a filter, got {type(target).__name__}")


class VectorStore:
    """Stores :class:`Document` s with embeddings and finds the ones nearest a query.

    Implementations provide the async methods ``aadd``, ``adelete`` and
    ``asimilarity_search``; the sync twins ``add``, ``delete`` and ``similarity_search`` run
    them on this thread's event loop (stores that do blocking I/O override them to run on the
    calling thread instead). Every method raises ``ValueError`` for invalid input.

    - ``add(documents)``: store the documents (an existing id is replaced).
    - ``delete(ids_or_filter)``: remove by a list of ids, or by a filter (object or text).
    - ``similarity_search(request)``: at most ``top_k`` documents with ``score`` at or above
      the threshold that match the filter, by descending ``score`` (cosine similarity); each
      result carries ``score`` and ``metadata["score"]`` / ``metadata["distance"]``.

    Advisors accept any object with these six methods, subclass or not (stores written against
    earlier releases); what this class adds later, such as :meth:`for_context`, they call
    through helpers that fall back when a store lacks it (:func:`store_for_context`).
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return type(self).__name__

    def for_context(self, context: Mapping[str, Any]) -> VectorStore:
        """This store as a request with ``context`` may use it; advisors search and add through
        it. A store shared by everyone returns itself (the default); one that keeps data per
        principal returns the view of the context's ``PRINCIPAL``
        (:mod:`advisors_app.core.attributes`)."""
        return self

    async def aadd(self, documents: Sequence[Document]) -> None:
        raise NotImplementedError

    async def adelete(self, ids_or_filter: Sequence[str] | Filter | str) -> None:
        raise NotImplementedError

    async def asimilarity_search(self, request: SearchRequest | str) -> list[Document]:
        raise NotImplementedError

    def add(self, documents: Sequence[Document]) -> None:
        run_sync(self.aadd(documents))

    def delete(self, ids_or_filter: Sequence[str] | Filter | str) -> None:
        run_sync(self.adelete(ids_or_filter))

    def similarity_search(self, request: SearchRequest | str) -> list[Document]:
        return run_sync(self.asimilarity_search(request))


def store_for_context(store: VectorStore, context: Mapping[str, Any]) -> VectorStore:
    """The view of ``store`` a request with ``context`` may use: ``store.for_context(context)``,
    or ``store`` itself when it has no ``for_context``.

    A store that implements the documented methods without subclassing :class:`VectorStore`
    (written before ``for_context`` existed) is one store shared by everyone, which is what the
    default ``for_context`` returns too.
    """
    for_context = getattr(store, "for_context", None)
    return store if for_context is None else for_context(context)


def check_documents(documents: Sequence[Document]) -> list[Document]:
    """The documents as a list; raises ``ValueError`` for ``None`` or non-documents."""
    if documents is None:
        raise ValueError("documents cannot be null")
    listed = list(documents)
    for document in listed:
        if not isinstance(document, Document):
            raise ValueError(f"expected Document objects, got {type(document).__name__}")
    return listed
