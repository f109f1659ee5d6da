"""Vector stores: ``Document``, ``SearchRequest``, the ``VectorStore`` contract, filters.

Spring AI ``org.springframework.ai.vectorstore``. The in-memory :class:`SimpleVectorStore`
lives here; the PostgreSQL/pgvector store is Django-side (``advisors_app.stores.vectors``).
Scores are cosine **similarities** (``1 - cosine distance``); thresholds are similarities in
[0, 1] (bug case B25).
"""

from __future__ import annotations

from .base import EmbeddingDimensionError, VectorStore, store_for_context
from .document import DISTANCE, RETRIEVAL, SCORE, Document
from .filters import (
    And,
    Eq,
    Filter,
    Gt,
    Gte,
    In,
    IsNotNull,
    IsNull,
    Lt,
    Lte,
    Ne,
    Nin,
    Not,
    Or,
)
from .lexical import LexicalText, exact_term, identifier_terms, lexical_text
from .parser import FilterExpressionTextParser, parse_filter, resolve_filter
from .search import DEFAULT_TOP_K, SEARCH_MODES, SIMILARITY_THRESHOLD_ACCEPT_ALL, SearchRequest
from .simple import SimpleVectorStore

__all__ = [
    "DEFAULT_TOP_K",
    "DISTANCE",
    "RETRIEVAL",
    "SCORE",
    "SEARCH_MODES",
    "SIMILARITY_THRESHOLD_ACCEPT_ALL",
    "And",
    "Document",
    "EmbeddingDimensionError",
    "Eq",
    "Filter",
    "FilterExpressionTextParser",
    "Gt",
    "Gte",
    "In",
    "IsNotNull",
    "IsNull",
    "LexicalText",
    "Lt",
    "Lte",
    "Ne",
    "Nin",
    "Not",
    "Or",
    "SearchRequest",
    "SimpleVectorStore",
    "VectorStore",
    "exact_term",
    "identifier_terms",
    "lexical_text",
    "parse_filter",
    "resolve_filter",
    "store_for_context",
]
