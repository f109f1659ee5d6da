"""Document retrieval for a query (``DocumentRetriever``, ``VectorStoreDocumentRetriever``).

Also :func:`narrowed`, the rule both retrieval advisors apply to a caller's filter: the
configured filter is a boundary, and a request's filter is ANDed with it (issue 18).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..exceptions import AdvisorStateError
from ..vectorstore import (
    And,
    Document,
    Filter,
    SearchRequest,
    VectorStore,
    resolve_filter,
    store_for_context,
)
from .query import Query
from .rerank import DocumentReranker, rerank_top_k

__all__ = ["FILTER_EXPRESSION", "DocumentRetriever", "VectorStoreDocumentRetriever", "narrowed"]

#: Query-context key of a per-request filter (an expression object or filter text).
FILTER_EXPRESSION = "vector_store_filter_expression"

FilterSource = Filter | str | Callable[[], Filter | str | None] | None


def narrowed(boundary: Filter | None, requested: Filter | None) -> Filter | None:
    """The filter a search runs with: ``boundary`` (the configured filter) AND ``requested``
    (a caller's), or whichever of the two is set; ``None`` when neither is.

    A caller's filter can narrow what the configured filter lets through, never widen it:
    ``narrowed(parse("tenant == 'a'"), parse("tenant == 'a' || tenant == 'b'"))`` matches
    tenant ``a`` only. Divergence from Spring AI, whose per-request filter *replaces* the
    configured one, so any caller could lift a tenant filter (issue 18).
    """
    if requested is None:
        return boundary
    if boundary is None:
        return requested
    return And(boundary, requested)


class DocumentRetriever:
    """Finds the documents relevant to a query: ``await retrieve(query)``."""

    __slots__ = ()

    async def retrieve(self, query: Query) -> list[Document]:
        raise NotImplementedError


class VectorStoreDocumentRetriever(DocumentRetriever):
    """Searches a vector store with the query text (Spring AI ``VectorStoreDocumentRetriever``).

    Defaults: ``top_k=4``, ``similarity_threshold=0.0`` (a cosine similarity; 0 accepts
    everything), no filter. ``filter_expression`` is an expression object, filter text, or a
    callable returning either, called on every retrieval (Spring's supplier; a
    ``contextvars`` lookup works there, a thread-local may not). A per-request filter in
    ``query.context["vector_store_filter_expression"]`` (object or non-blank text) is
    **ANDed** with ``filter_expression`` (:func:`narrowed`): it narrows the search, never
    widens it. Blank text, or ``allow_request_filter=False``, leaves the configured filter
    alone (a refused filter is ignored here; the Django layer refuses it at validation).
    ``ef_search`` goes into every search request (``SearchRequest.ef_search``: how many
    candidates an HNSW index keeps; ``None``: the store's default; our addition).
    ``search_mode``, ``vector_weight``, ``lexical_weight`` and ``rrf_k`` go into every search
    request too (vector, lexical or hybrid search; ``None``: the store's). With a
    ``reranker``, the search asks for ``rerank_top_n`` candidates (at least ``top_k``), the
    reranker re-orders them and the first ``top_k`` are returned (our addition; Spring AI 2.1
    reranks in a ``DocumentPostProcessor``).
    Raises ``AdvisorStateError`` ("vectorStore cannot be null") and ``ValueError`` with
    Spring's messages ("topK must be greater than 0", "similarityThreshold must be equal to or
    greater than 0.0"), or naming the parameter of an invalid filter text.

    Divergence (issue 18): Spring's per-request filter *replaces* the configured one (and bug
    case B19 asked for that), so a caller's ``tenant == 'a' || tenant == 'b'`` lifted a
    chain's ``tenant == 'a'``; here the configured filter is a boundary.
    """

    __slots__ = (
        "allow_request_filter",
        "ef_search",
        "filter_expression",
        "lexical_weight",
        "rerank_top_n",
        "reranker",
        "rrf_k",
        "search_mode",
        "similarity_threshold",
        "top_k",
        "vector_store",
        "vector_weight",
    )

    def __init__(
        self,
        vector_store: VectorStore,
        similarity_threshold: float = 0.0,
        top_k: int = 4,
        filter_expression: FilterSource = None,
        *,
        allow_request_filter: bool = True,
        ef_search: int | None = None,
        search_mode: str | None = None,
        vector_weight: float | None = None,
        lexical_weight: float | None = None,
        rrf_k: int | None = None,
        reranker: DocumentReranker | None = None,
        rerank_top_n: int = 20,
    ) -> None:
        if vector_store is None:
            raise AdvisorStateError("vectorStore cannot be null")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise ValueError("topK must be greater than 0")
        if not isinstance(similarity_threshold, (int, float)) or similarity_threshold < 0.0:
            raise ValueError("similarityThreshold must be equal to or greater than 0.0")
        if not callable(filter_expression):
            resolve_filter(filter_expression, "filter_expression")
        self.vector_store = vector_store
        self.similarity_threshold = float(similarity_threshold)
        self.top_k = top_k
        self.filter_expression = filter_expression
        self.allow_request_filter = bool(allow_request_filter)
        #: Candidates an HNSW search keeps (``SearchRequest.ef_search``; ``None``: the store's).
        self.ef_search = ef_search
        # Checked here, once, rather than at the first search.
        SearchRequest(
            search_mode=search_mode,
            vector_weight=vector_weight,
            lexical_weight=lexical_weight,
            rrf_k=rrf_k,
        )
        if isinstance(rerank_top_n, bool) or not isinstance(rerank_top_n, int) or rerank_top_n < 1:
            raise ValueError("rerank_top_n must be greater than 0")
        self.search_mode = search_mode
        self.vector_weight = vector_weight
        self.lexical_weight = lexical_weight
        self.rrf_k = rrf_k
        self.reranker = reranker
        self.rerank_top_n = rerank_top_n

    def _default_filter(self) -> Filter | None:
        source: Any = self.filter_expression
        if callable(source) and not isinstance(source, Filter):
            source = source()
        return resolve_filter(source, "filter_expression")

    def request_filter(self, query: Query) -> Filter | None:
        """The filter for ``query``: the configured one ANDed with the request's, if allowed."""
        requested = None
        if self.allow_request_filter:
            requested = resolve_filter(query.context.get(FILTER_EXPRESSION), FILTER_EXPRESSION)
        return narrowed(self._default_filter(), requested)

    async def retrieve(self, query: Query) -> list[Document]:
        if query is None:
            raise ValueError("query cannot be null")
        reranker = self.reranker
        request = SearchRequest(
            query=query.text,
            top_k=self.top_k if reranker is None else max(self.top_k, self.rerank_top_n),
            similarity_threshold=self.similarity_threshold,
            filter_expression=self.request_filter(query),
            ef_search=self.ef_search,
            search_mode=self.search_mode,
            vector_weight=self.vector_weight,
            lexical_weight=self.lexical_weight,
            rrf_k=self.rrf_k,
        )
        store = store_for_context(self.vector_store, query.context)
        documents = await store.asimilarity_search(request)
        if reranker is None:
            return documents
        return await rerank_top_k(reranker, query.text, documents, self.top_k)
