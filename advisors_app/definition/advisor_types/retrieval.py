"""Built-in retrieval types: QuestionAnswer, RetrievalAugmentation, vector-store chat memory.

Each searches a collection through a user-scoped store (``advisors_app.stores.scoped``): a turn sees
the collection's shared documents and its user's own, never another user's.

The two RAG types treat their ``filter_expression`` as a boundary (issue 18): a caller's filter
(``qa_filter_expression`` / ``vector_store_filter_expression``) is accepted only when the row
sets ``allow_request_filter`` (default false, since chains are served to non-staff users; the
chain's params schema then does not offer the param and a request sending it is refused), and
it is always ANDed with the row's filter. Their documents go into the prompt through the
formatter ``document_format`` names (default ``xml``: one escaped ``<document>`` element each).
Their ``search_mode`` (``vector``, ``lexical``, ``hybrid``; empty: the collection's),
``vector_weight``, ``lexical_weight`` and ``rrf_k`` choose how they search, and ``rerank``
(``{"top_n": 20, "method": "bm25"}``) re-orders the search's top ``top_n`` before the first
``top_k`` are kept (docs/retrieval.md).
"""

from __future__ import annotations

from typing import Any

from advisors_app.core import rag
from advisors_app.core.advisors.question_answer import FILTER_EXPRESSION as QA_FILTER
from advisors_app.core.advisors.question_answer import QuestionAnswerAdvisor
from advisors_app.core.advisors.vector_store_chat_memory import VectorStoreChatMemoryAdvisor
from advisors_app.core.rag.advisor import RetrievalAugmentationAdvisor
from advisors_app.core.rag.augmentation import (
    DEFAULT_DOCUMENT_FORMAT,
    DOCUMENT_FORMATTERS,
    document_formatter,
)
from advisors_app.core.rag.rerank import DEFAULT_RERANKER, RERANKERS
from advisors_app.core.rag.retrieval import FILTER_EXPRESSION as RAG_FILTER
from advisors_app.core.vectorstore.search import (
    EF_SEARCH_MAX,
    EF_SEARCH_MIN,
    RRF_K_MAX,
    SEARCH_MODES,
    WEIGHT_MAX,
)
from advisors_app.definition.registry import AdvisorSpec, AdvisorType
from advisors_app.validation import FILTER_EXPRESSION_FORMAT

from ._schema import BuiltinTypes, object_schema

__all__ = ["TYPES"]


def _store(spec: AdvisorSpec) -> Any:
    return spec.vector_store(spec.params["collection"], spec.params.get("embedding_model"))


def _template(spec: AdvisorSpec, param: str) -> str | None:
    slug = spec.params.get(param)
    return spec.template(slug) if slug else None


def _search_options(params: dict[str, Any]) -> dict[str, Any]:
    """The search-mode params of a row, as keyword arguments (absent: the collection's)."""
    return {
        "ef_search": params.get("ef_search"),
        "search_mode": params.get("search_mode") or None,
        "vector_weight": params.get("vector_weight"),
        "lexical_weight": params.get("lexical_weight"),
        "rrf_k": params.get("rrf_k"),
    }


def _rerank(params: dict[str, Any]) -> dict[str, Any]:
    rerank = params.get("rerank")
    if not rerank:
        return {}
    reranker = RERANKERS[rerank.get("method", DEFAULT_RERANKER)]()
    return {"reranker": reranker, "rerank_top_n": rerank.get("top_n", RERANK_TOP_N)}


def _question_answer(spec: AdvisorSpec) -> Any:
    from advisors_app.core.vectorstore import SearchRequest

    params = spec.params
    search = SearchRequest(
        top_k=params["top_k"],
        similarity_threshold=params["similarity_threshold"],
        filter_expression=params.get("filter_expression") or None,
        **_search_options(params),
    )
    return QuestionAnswerAdvisor(
        _store(spec),
        search,
        _template(spec, "prompt_template"),
        order=spec.order,
        document_formatter=document_formatter(params["document_format"]),
        allow_request_filter=params["allow_request_filter"],
        **_rerank(params),
    )


def _retrieval_augmentation(spec: AdvisorSpec) -> Any:
    params = spec.params
    transformers = []
    if params.get("compress_query_with"):
        model = spec.chat_model(params["compress_query_with"])
        transformers.append(rag.CompressionQueryTransformer(model))
    if params.get("rewrite_query_with"):
        transformers.append(
            rag.RewriteQueryTransformer(spec.chat_model(params["rewrite_query_with"]))
        )
    expander = None
    if params.get("multi_query_with"):
        expander = rag.MultiQueryExpander(
            spec.chat_model(params["multi_query_with"]),
            number_of_queries=params["number_of_queries"],
        )
    return RetrievalAugmentationAdvisor(
        rag.VectorStoreDocumentRetriever(
            _store(spec),
            similarity_threshold=params["similarity_threshold"],
            top_k=params["top_k"],
            filter_expression=params.get("filter_expression") or None,
            allow_request_filter=params["allow_request_filter"],
            **_search_options(params),
            **_rerank(params),
        ),
        query_transformers=transformers,
        query_expander=expander,
        query_augmenter=rag.ContextualQueryAugmenter(
            prompt_template=_template(spec, "prompt_template"),
            empty_context_prompt_template=_template(spec, "empty_context_prompt_template"),
            allow_empty_context=params["allow_empty_context"],
            document_formatter=document_formatter(params["document_format"]),
        ),
        order=spec.order,
    )


def _vector_store_chat_memory(spec: AdvisorSpec) -> Any:
    return VectorStoreChatMemoryAdvisor(
        _store(spec),
        top_k=spec.params["top_k"],
        system_prompt_template=_template(spec, "system_prompt_template"),
        order=spec.order,
    )


_COLLECTION = {
    "collection": {
        "type": "string",
        "x-reference": "collection",
        "description": "Slug of the collection to search.",
    },
    "embedding_model": {
        "type": "string",
        "x-reference": "embedding_model",
        "description": "The model the collection was embedded with (default: MiniLM, 384).",
    },
}
_SEARCH = {
    **_COLLECTION,
    "top_k": {"type": "integer", "minimum": 1, "maximum": 100, "default": 4},
    "similarity_threshold": {
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "default": 0.0,
        "description": "Lowest cosine similarity kept (0 keeps everything).",
    },
    "filter_expression": {
        "type": "string",
        "format": FILTER_EXPRESSION_FORMAT,
        "description": "Metadata filter, e.g. source == 'faq.md' && year >= 2024. A boundary: "
        "a caller's filter is ANDed with it.",
    },
    "allow_request_filter": {
        "type": "boolean",
        "default": False,
        "description": "Let callers narrow the search with a filter of their own (a request "
        "param), always ANDed with filter_expression. Off: the param is refused.",
    },
    "document_format": {
        "type": "string",
        "enum": list(DOCUMENT_FORMATTERS),
        "default": DEFAULT_DOCUMENT_FORMAT,
        "description": "How documents are written into the prompt: xml (one escaped "
        '<document> element each), xml_with_source (with source="file name"), plain (raw '
        "texts joined by newlines, as Spring AI: only for documents you trust like the "
        "template, since a document can then write instructions into the prompt).",
    },
}

#: Candidates a reranker sees when the ``rerank`` param does not say.
RERANK_TOP_N = 20
_WEIGHT = {"type": "number", "minimum": 0, "maximum": WEIGHT_MAX}
_EF_SEARCH = {
    "ef_search": {
        "type": "integer",
        "minimum": EF_SEARCH_MIN,
        "maximum": EF_SEARCH_MAX,
        "description": "Candidates each HNSW search keeps (empty: the collection's setting, "
        "else 40). Higher finds more of the true nearest documents and costs more time.",
    },
    "search_mode": {
        "type": "string",
        "enum": list(SEARCH_MODES),
        "description": "vector (embeddings), lexical (full text: identifiers as written) or "
        "hybrid (both, fused by reciprocal rank); empty: the collection's setting.",
    },
    "vector_weight": {
        **_WEIGHT,
        "description": "Hybrid: weight of the vector ranking (empty: the collection's).",
    },
    "lexical_weight": {
        **_WEIGHT,
        "description": "Hybrid: weight of the full-text ranking (empty: the collection's).",
    },
    "rrf_k": {
        "type": "integer",
        "minimum": 1,
        "maximum": RRF_K_MAX,
        "description": "Hybrid: k of the fusion, weight / (k + rank) (empty: the collection's).",
    },
    "rerank": {
        "type": "object",
        "properties": {
            "top_n": {
                "type": "integer",
                "minimum": 1,
                "maximum": 100,
                "default": RERANK_TOP_N,
                "description": "Candidates the reranker re-orders (at least top_k are asked).",
            },
            "method": {
                "type": "string",
                "enum": list(RERANKERS),
                "default": DEFAULT_RERANKER,
                "description": "bm25: BM25 over the candidates fused with the search's order.",
            },
        },
        "additionalProperties": False,
        "description": "Re-order the search's top top_n before keeping top_k; absent: no "
        "reranking.",
    },
}


def _request_filter(name: str) -> dict[str, Any]:
    return {
        name: {
            "type": "string",
            "format": FILTER_EXPRESSION_FORMAT,
            "description": "A filter for this request's search, ANDed with the chain's "
            "filter_expression (it can narrow the search, never widen it).",
            "x-enabled-by": "allow_request_filter",
        }
    }


_CHAT_MODEL = {"type": "string", "x-reference": "chat_model"}

TYPES: BuiltinTypes = (
    (
        "question_answer",
        lambda: AdvisorType(
            key="question_answer",
            label="Question answering (RAG)",
            factory=_question_answer,
            advisor_class=QuestionAnswerAdvisor,
            description="Searches a collection with the user's question and adds the "
            "documents to the prompt (QuestionAnswerAdvisor).",
            params_schema=object_schema(
                {
                    **_SEARCH,
                    **_EF_SEARCH,
                    "prompt_template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                        "x-required-placeholders": ["query", "question_answer_context"],
                    },
                },
                required=("collection",),
            ),
            request_params=_request_filter(QA_FILTER),
        ),
    ),
    (
        "retrieval_augmentation",
        lambda: AdvisorType(
            key="retrieval_augmentation",
            label="Retrieval augmentation (modular RAG)",
            factory=_retrieval_augmentation,
            advisor_class=RetrievalAugmentationAdvisor,
            description="Rewrites or compresses the question (optional), retrieves, joins and "
            "augments the prompt (RetrievalAugmentationAdvisor).",
            params_schema=object_schema(
                {
                    **_SEARCH,
                    **_EF_SEARCH,
                    "allow_empty_context": {
                        "type": "boolean",
                        "default": False,
                        "description": "Without documents, send the question as it is "
                        "(false: ask the model to say it cannot answer).",
                    },
                    "prompt_template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                        "x-required-placeholders": ["query", "context"],
                    },
                    "empty_context_prompt_template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                    },
                    "compress_query_with": {
                        **_CHAT_MODEL,
                        "description": "Chat model that turns a follow-up and the history "
                        "into a standalone question.",
                    },
                    "rewrite_query_with": {
                        **_CHAT_MODEL,
                        "description": "Chat model that rewrites the question for search.",
                    },
                    "multi_query_with": {
                        **_CHAT_MODEL,
                        "description": "Chat model that writes variants of the question.",
                    },
                    "number_of_queries": {"type": "integer", "minimum": 1, "default": 3},
                },
                required=("collection",),
            ),
            request_params=_request_filter(RAG_FILTER),
        ),
    ),
    (
        "vector_store_chat_memory",
        lambda: AdvisorType(
            key="vector_store_chat_memory",
            label="Long-term memory (vector store)",
            factory=_vector_store_chat_memory,
            advisor_class=VectorStoreChatMemoryAdvisor,
            description="Stores each turn in a collection and adds the most similar past "
            "messages of the conversation to the system text (VectorStoreChatMemoryAdvisor).",
            params_schema=object_schema(
                {
                    **_COLLECTION,
                    "top_k": {"type": "integer", "minimum": 1, "default": 20},
                    "system_prompt_template": {
                        "type": "string",
                        "x-reference": "prompt_template",
                        "x-required-placeholders": ["instructions", "long_term_memory"],
                    },
                },
                required=("collection",),
            ),
        ),
    ),
)
