"""``QuestionAnswerAdvisor``: the minimal RAG advisor (seed 000 §6.5, 003 §4.2, 004).

Spring AI ``org.springframework.ai.chat.client.advisor.vectorstore.QuestionAnswerAdvisor``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from ..advisor import AdvisorRole, BaseAdvisor
from ..guards.rails import screen_documents
from ..mappings import merged
from ..rag.augmentation import xml_document_formatter
from ..rag.rerank import DocumentReranker, rerank_top_k
from ..rag.retrieval import narrowed
from ..rag.turns import augmented_marker, current_question, recall, reentered, remember, turn_key
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..templates import PromptTemplate
from ..vectorstore import (
    Document,
    Filter,
    SearchRequest,
    VectorStore,
    resolve_filter,
    store_for_context,
)

__all__ = [
    "DEFAULT_ORDER",
    "DEFAULT_PROMPT_TEMPLATE",
    "FILTER_EXPRESSION",
    "RETRIEVED_DOCUMENTS",
    "QuestionAnswerAdvisor",
]

#: Context and response-metadata key of the retrieved documents (a list of ``Document``).
RETRIEVED_DOCUMENTS = "qa_retrieved_documents"
#: Context key of a per-request filter: an expression object or Spring filter text, ANDed with
#: the configured filter.
FILTER_EXPRESSION = "qa_filter_expression"

DEFAULT_PROMPT_TEMPLATE = """\
{query}

Context information is below, surrounded by ---------------------

---------------------
{question_answer_context}
---------------------

Given the context and provided history information and not prior knowledge,
reply to the user comment. If the answer is not in the context, inform
the user that you can't answer the question.
"""


class QuestionAnswerAdvisor(BaseAdvisor):
    """Searches a vector store with the user's question and puts the results in the prompt.

    ``before``: searches ``vector_store`` with the last user message's text and
    ``search_request`` (default: ``top_k=4``, similarity threshold 0.0, no filter), then
    replaces that message with ``prompt_template`` (Spring's template, verbatim) rendered with
    ``query`` (the user's text) and ``question_answer_context`` (the documents). The documents
    go to ``context["qa_retrieved_documents"]`` and ``after`` adds them to the response
    metadata under the same key, in calls and streams.

    A per-request filter in ``context["qa_filter_expression"]`` (expression object or filter
    text) is **ANDed** with ``search_request.filter_expression``
    (:func:`~advisors_app.core.rag.narrowed`): the configured filter is a boundary a caller can
    narrow and never widen. Blank text keeps the configured filter alone (bug case B19);
    invalid text raises ``ValueError`` naming ``qa_filter_expression`` and the position. With
    ``allow_request_filter=False`` the context value is ignored (the Django advisor type
    refuses it at validation instead, and defaults to refusing).

    Empty-context rule (bug case B21): with no documents the template is still applied, with
    an empty context block; it tells the model to say it cannot answer (Spring's behaviour).

    Divergences, each a fix: a per-request filter narrows the configured one instead of
    **replacing** it (Spring replaces, which B19 kept; a caller could then lift a chain's
    tenant filter, issue 18); the documents are formatted by ``document_formatter``, by
    default one XML-escaped ``<document>`` element per document, so retrieved text cannot close
    the context block or pose as instructions (Spring joins raw texts, defect 5.6.46;
    pass ``document_formatter=join_document_texts`` for Spring's output); a custom template must
    have real ``{query}`` and ``{question_answer_context}`` placeholders (defect 5.6.38);
    rendering is single-pass, so braces in documents or user text stay text; filter objects are
    used as given, never turned into text (B19); ``top_k=0`` is refused (5.6.46); a prompt
    with no user text is sent unchanged, without searching; and retrieval runs once per user
    turn even when a tool loop re-enters the chain (defect 5.4.28).

    Retrieved documents pass the turn's ``documents`` guard rail, if any, before they enter the
    prompt (:func:`~advisors_app.core.guards.rails.screen_documents`: a dropped one is replaced
    by a notice and marked in its metadata).

    Our additions: ``search_request.search_mode`` (and the fusion weights) choose vector,
    lexical or hybrid search; with a ``reranker`` the search asks for ``rerank_top_n``
    candidates (at least ``top_k``), the reranker re-orders them and the first ``top_k`` go
    into the prompt.
    """

    __slots__ = (
        "_order",
        "allow_request_filter",
        "document_formatter",
        "prompt_template",
        "rerank_top_n",
        "reranker",
        "search_request",
        "vector_store",
    )

    DEFAULT_ORDER: ClassVar[int] = 0
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.RAG, AdvisorRole.REWRITE})

    def __init__(
        self,
        vector_store: VectorStore,
        search_request: SearchRequest | None = None,
        prompt_template: str | PromptTemplate | None = None,
        order: int = DEFAULT_ORDER,
        *,
        document_formatter: Callable[[Sequence[Document]], str] | None = None,
        allow_request_filter: bool = True,
        reranker: DocumentReranker | None = None,
        rerank_top_n: int = 20,
    ) -> None:
        if vector_store is None:
            raise ValueError("vectorStore cannot be null")
        if search_request is None:
            search_request = SearchRequest()
        elif not isinstance(search_request, SearchRequest):
            raise ValueError("searchRequest must be a SearchRequest")
        if prompt_template is None:
            prompt_template = DEFAULT_PROMPT_TEMPLATE
        text = (
            prompt_template.template
            if isinstance(prompt_template, PromptTemplate)
            else prompt_template
        )
        self.vector_store = vector_store
        self.search_request = search_request
        self.prompt_template = PromptTemplate(text, required=("query", "question_answer_context"))
        self.document_formatter = document_formatter or xml_document_formatter
        self.allow_request_filter = bool(allow_request_filter)
        if isinstance(rerank_top_n, bool) or not isinstance(rerank_top_n, int) or rerank_top_n < 1:
            raise ValueError("rerank_top_n must be greater than 0")
        self.reranker = reranker
        self.rerank_top_n = rerank_top_n
        self._order = order

    def request_filter(self, context: Mapping[str, Any]) -> Filter | None:
        """The search's filter for a request: the configured one ANDed with
        ``context["qa_filter_expression"]`` (when allowed and not blank)."""
        requested = None
        if self.allow_request_filter:
            requested = resolve_filter(context.get(FILTER_EXPRESSION), FILTER_EXPRESSION)
        return narrowed(self.search_request.filter_expression, requested)

    async def before(  # type: ignore[override]
        self, request: ChatClientRequest, chain: Any
    ) -> ChatClientRequest:
        prompt = request.prompt
        index, text, augmented = current_question(self, prompt)
        if index < 0 or not text.strip():
            return request
        search = self.search_request.mutate(
            query=text, filter_expression=self.request_filter(request.context)
        )
        key = turn_key(self, prompt, text, search)
        cached = recall(key) if augmented or reentered(prompt) else None
        if cached is None:
            store = store_for_context(self.vector_store, request.context)
            if self.reranker is None:
                documents = await store.asimilarity_search(search)
            else:
                candidates = search.mutate(top_k=max(search.top_k, self.rerank_top_n))
                found = await store.asimilarity_search(candidates)
                documents = await rerank_top_k(self.reranker, text, found, search.top_k)
            documents = await screen_documents(request.context, documents)
            augmented_text = self.prompt_template.render(
                query=text, question_answer_context=self.document_formatter(documents)
            )
            cached = (documents, augmented_text)
            remember(key, cached)
        documents, augmented_text = cached
        if not augmented:
            marker = augmented_marker(self)
            prompt = prompt.augment_user_message(
                lambda m: m.mutate(text=augmented_text, metadata=merged(m.metadata, {marker: text}))
            )
        return request.mutate(prompt=prompt, context={RETRIEVED_DOCUMENTS: documents})

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        documents = response.context.get(RETRIEVED_DOCUMENTS)
        if documents is None:
            return response
        chat_response = response.chat_response or ChatResponse()
        return response.mutate(
            chat_response=chat_response.with_metadata(**{RETRIEVED_DOCUMENTS: documents})
        )


#: ``QuestionAnswerAdvisor.DEFAULT_ORDER`` (Spring AI's 0), kept as a module constant.
DEFAULT_ORDER = QuestionAnswerAdvisor.DEFAULT_ORDER
