"""Modular RAG (Spring AI ``spring-ai-rag``): queries, transformers, expander, retriever,
joiner, augmenter and the :class:`RetrievalAugmentationAdvisor` that runs them.
"""

from __future__ import annotations

from .advisor import DOCUMENT_CONTEXT, RetrievalAugmentationAdvisor
from .augmentation import (
    DEFAULT_DOCUMENT_FORMAT,
    DOCUMENT_FORMATTERS,
    ContextualQueryAugmenter,
    DocumentFormatter,
    QueryAugmenter,
    document_formatter,
    join_document_texts,
    xml_document_formatter,
    xml_element,
    xml_source_document_formatter,
)
from .expansion import MultiQueryExpander, QueryExpander
from .join import ConcatenationDocumentJoiner, DocumentJoiner
from .query import Query
from .rerank import (
    DEFAULT_RERANKER,
    RERANKERS,
    Bm25Reranker,
    DecisionDocumentReranker,
    DocumentReranker,
    rerank_top_k,
)
from .retrieval import (
    FILTER_EXPRESSION,
    DocumentRetriever,
    VectorStoreDocumentRetriever,
    narrowed,
)
from .transformers import (
    CompressionQueryTransformer,
    QueryTransformer,
    RewriteQueryTransformer,
    TranslationQueryTransformer,
)

__all__ = [
    "DEFAULT_DOCUMENT_FORMAT",
    "DEFAULT_RERANKER",
    "DOCUMENT_CONTEXT",
    "DOCUMENT_FORMATTERS",
    "FILTER_EXPRESSION",
    "RERANKERS",
    "Bm25Reranker",
    "CompressionQueryTransformer",
    "ConcatenationDocumentJoiner",
    "ContextualQueryAugmenter",
    "DecisionDocumentReranker",
    "DocumentFormatter",
    "DocumentJoiner",
    "DocumentReranker",
    "DocumentRetriever",
    "MultiQueryExpander",
    "Query",
    "QueryAugmenter",
    "QueryExpander",
    "QueryTransformer",
    "RetrievalAugmentationAdvisor",
    "RewriteQueryTransformer",
    "TranslationQueryTransformer",
    "VectorStoreDocumentRetriever",
    "document_formatter",
    "join_document_texts",
    "narrowed",
    "rerank_top_k",
    "xml_document_formatter",
    "xml_element",
    "xml_source_document_formatter",
]
