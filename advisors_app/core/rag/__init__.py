"""Modular RAG (Spring AI ``spring-ai-rag``): queries, transformers, expander, retriever,
joiner, augmenter and the :class:`RetrievalAugmentationAdvisor` that runs them.
"""

from __future__ import annotations

from .advisor import DOCUMENT_CONTEXT, RetrievalAugmentationAdvisor
from .augmentation import (
    ContextualQueryAugmenter,
    QueryAugmenter,
    join_document_texts,
    xml_document_formatter,
)
from .expansion import MultiQueryExpander, QueryExpander
from .join import ConcatenationDocumentJoiner, DocumentJoiner
from .query import Query
from .retrieval import FILTER_EXPRESSION, DocumentRetriever, VectorStoreDocumentRetriever
from .transformers import (
    CompressionQueryTransformer,
    QueryTransformer,
    RewriteQueryTransformer,
    TranslationQueryTransformer,
)

__all__ = [
    "DOCUMENT_CONTEXT",
    "FILTER_EXPRESSION",
    "CompressionQueryTransformer",
    "ConcatenationDocumentJoiner",
    "ContextualQueryAugmenter",
    "DocumentJoiner",
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
    "join_document_texts",
    "xml_document_formatter",
]
