"""``RetrievalAugmentationAdvisor``: modular RAG around the chat call.

Spring AI ``org.springframework.ai.rag.advisor.RetrievalAugmentationAdvisor`` (seed 004, 003
§4.3): transform the query, expand it, retrieve for every query concurrently, join, post-process,
then augment the user message.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from ..advisor import AdvisorRole, BaseAdvisor, has_role
from ..exceptions import AdvisorStateError
from ..guards.rails import screen_documents
from ..mappings import merged
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..vectorstore import Document
from ._tasks import call_maybe_blocking, gather_or_cancel
from .augmentation import ContextualQueryAugmenter, QueryAugmenter
from .expansion import QueryExpander
from .join import ConcatenationDocumentJoiner, DocumentJoiner
from .query import Query
from .retrieval import DocumentRetriever
from .transformers import QueryTransformer
from .turns import augmented_marker, current_question, recall, reentered, remember, turn_key

__all__ = ["DOCUMENT_CONTEXT", "RetrievalAugmentationAdvisor"]

#: Context and response-metadata key of the documents used to augment the prompt.
DOCUMENT_CONTEXT = "rag_document_context"


def _no_nulls(items: Iterable[Any] | None, message: str) -> tuple[Any, ...]:
    listed = tuple(items or ())
    if any(item is None for item in listed):
        raise ValueError(message)
    return listed


class RetrievalAugmentationAdvisor(BaseAdvisor):
    """Retrieves documents for the user's question and augments the prompt with them.

    ``before``: the query is the last user message's text with the earlier messages as
    history and the request context as context; ``query_transformers`` run in order, the
    ``query_expander`` (if any) makes several queries, ``document_retriever`` runs for each
    distinct query **concurrently**, ``document_joiner`` (default
    :class:`ConcatenationDocumentJoiner`) merges them, ``document_post_processors``
    (``process(query, documents)``, plain or async) refine them given the original query, and
    ``query_augmenter`` (default :class:`ContextualQueryAugmenter`) rewrites the user message.
    The documents go to ``context["rag_document_context"]``; ``after`` copies them into the
    response metadata under the same key (calls and streams).

    Divergences, each a fix:

    * an empty or missing user message skips retrieval and leaves the prompt unchanged
      (Spring raises "text cannot be null or empty", defect 5.6.39);
    * the query history excludes the current question (defect 5.6.44, bug case B22);
    * equal expanded queries are retrieved once and never crash (defect 5.6.40); the joined
      order is deterministic (defect 5.6.41);
    * retrieval runs once per user turn: when a tool loop re-enters the chain, the documents
      and augmented text of the turn's first round are reused (defect 5.4.28);
    * the documents pass the turn's ``documents`` guard rail, if any, after post-processing and
      before augmentation (:func:`~advisors_app.core.guards.rails.screen_documents`);
    * concurrency uses tasks of the running loop, which copy ``contextvars`` (Spring's own
      thread pool loses thread-locals and is never shut down, defect 5.6.42).

    Raises ``AdvisorStateError("documentRetriever cannot be null")`` and ``ValueError`` for
    ``None`` transformers or post-processors. A ``RuntimeWarning`` says so when query
    transformers or an expander run outside (before) a memory advisor, where they see no
    history.
    """

    __slots__ = (
        "_order",
        "document_joiner",
        "document_post_processors",
        "document_retriever",
        "query_augmenter",
        "query_expander",
        "query_transformers",
    )

    DEFAULT_ORDER: ClassVar[int] = 0
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.RAG, AdvisorRole.REWRITE})

    def __init__(
        self,
        document_retriever: DocumentRetriever,
        query_transformers: Sequence[QueryTransformer] = (),
        query_expander: QueryExpander | None = None,
        document_joiner: DocumentJoiner | None = None,
        document_post_processors: Sequence[Any] = (),
        query_augmenter: QueryAugmenter | None = None,
        order: int = DEFAULT_ORDER,
    ) -> None:
        if document_retriever is None:
            raise AdvisorStateError("documentRetriever cannot be null")
        self.document_retriever = document_retriever
        self.query_transformers = _no_nulls(
            query_transformers, "queryTransformers cannot contain null elements"
        )
        self.query_expander = query_expander
        self.document_joiner = document_joiner or ConcatenationDocumentJoiner()
        self.document_post_processors = _no_nulls(
            document_post_processors, "documentPostProcessors cannot contain null elements"
        )
        self.query_augmenter = query_augmenter or ContextualQueryAugmenter()
        self._order = order

    async def before(  # type: ignore[override]
        self, request: ChatClientRequest, chain: Any
    ) -> ChatClientRequest:
        prompt = request.prompt
        index, text, augmented = current_question(self, prompt)
        if index < 0 or not text.strip():
            return request
        self._warn_if_memory_is_inside(chain)
        key = turn_key(self, prompt, text)
        cached = recall(key) if augmented or reentered(prompt) else None
        if cached is None:
            query = Query(text, prompt.instructions[:index], request.context)
            cached = await self._retrieve_and_augment(query)
            remember(key, cached)
        documents, augmented_text = cached
        if not augmented:
            marker = augmented_marker(self)
            prompt = prompt.augment_user_message(
                lambda m: m.mutate(text=augmented_text, metadata=merged(m.metadata, {marker: text}))
            )
        return request.mutate(prompt=prompt, context={DOCUMENT_CONTEXT: documents})

    async def _retrieve_and_augment(self, original: Query) -> tuple[list[Document], str]:
        query = original
        for transformer in self.query_transformers:
            query = await transformer.transform(query)
        queries = await self.query_expander.expand(query) if self.query_expander else [query]
        distinct: list[Query] = []
        for candidate in queries:
            if candidate not in distinct:
                distinct.append(candidate)
        retrieve = self.document_retriever.retrieve
        results = await gather_or_cancel(call_maybe_blocking(retrieve, q) for q in distinct)
        documents = self.document_joiner.join(list(zip(distinct, results, strict=True)))
        for processor in self.document_post_processors:
            documents = list(await call_maybe_blocking(processor.process, original, documents))
        documents = await screen_documents(original.context, documents)
        return documents, self.query_augmenter.augment(original, documents).text

    def _warn_if_memory_is_inside(self, chain: Any) -> None:
        if not (self.query_transformers or self.query_expander):
            return
        advisors = tuple(getattr(chain, "call_advisors", ()) or ())
        if self not in advisors:
            advisors = tuple(getattr(chain, "stream_advisors", ()) or ())
        if self in advisors:
            inner = advisors[advisors.index(self) + 1 :]
            if any(has_role(a, AdvisorRole.MEMORY) for a in inner):
                warnings.warn(
                    f"{self.name} (order {self.order}) runs before a memory advisor, so its "
                    "query transformers see no conversation history; give the memory advisor "
                    "a smaller order than the retrieval advisor",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        documents = response.context.get(DOCUMENT_CONTEXT)
        if documents is None:
            return response
        chat_response = response.chat_response or ChatResponse()
        return response.mutate(
            chat_response=chat_response.with_metadata(**{DOCUMENT_CONTEXT: documents})
        )
