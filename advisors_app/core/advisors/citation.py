"""``CitationAdvisor``: exposes the documents retrieved for an answer as its sources.

Recipe 2 of seed §6.15 ("引用溯源 advisor").
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, ClassVar

from ..advisor import LOWEST_PRECEDENCE, CallAdvisor, StreamAdvisor
from ..aggregation import ChatResponseAccumulator
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..streams import closing_stream
from ._support import metadata_chunk, replace_texts

__all__ = ["CITATIONS", "DOCUMENT_KEYS", "CitationAdvisor", "default_citation_renderer"]

#: Response metadata and context key: the sources, a list of dicts (see ``CitationAdvisor``).
CITATIONS = "citations"
#: Where retrievers leave their documents: ``QuestionAnswerAdvisor.RETRIEVED_DOCUMENTS`` and
#: ``RetrievalAugmentationAdvisor``'s ``DOCUMENT_CONTEXT``.
DOCUMENT_KEYS = ("qa_retrieved_documents", "rag_document_context")

_TITLE_KEYS = ("title", "source", "file_name", "filename", "url")


def default_citation_renderer(citations: Sequence[Mapping[str, Any]]) -> str:
    """``"\\n\\nSources:\\n[1] <title or id>\\n..."``, appended to the answer when rendering."""
    lines = [f"[{c['index']}] {c.get('title') or c.get('id') or 'document'}" for c in citations]
    return "\n\nSources:\n" + "\n".join(lines)


def _field(document: Any, name: str) -> Any:
    if isinstance(document, Mapping):
        return document.get(name)
    return getattr(document, name, None)


def _citation(index: int, document: Any) -> dict[str, Any]:
    metadata = _field(document, "metadata") or {}
    entry: dict[str, Any] = {"index": index, "id": _field(document, "id")}
    title = next((metadata[k] for k in _TITLE_KEYS if metadata.get(k)), None)
    if title is not None:
        entry["title"] = str(title)
    source = metadata.get("source") or metadata.get("url")
    if source is not None:
        entry["source"] = str(source)
    score = _field(document, "score")
    if score is not None:
        entry["score"] = score
    return entry


class CitationAdvisor(CallAdvisor, StreamAdvisor):
    """Adds the sources of an answer, from the retrieved documents, to the response metadata.

    Reads the documents that ``QuestionAnswerAdvisor`` / ``RetrievalAugmentationAdvisor`` put in
    the context (:data:`DOCUMENT_KEYS`, response context first, then request context) and puts
    :data:`CITATIONS` — ``[{"index": 1, "id": ..., "title": ..., "source": ..., "score": ...}]``
    (``title``/``source`` from the document metadata's ``title``, ``source``, ``file_name``,
    ``url``; absent fields left out) — into the response metadata and context. With
    ``render=True`` the list, formatted by ``renderer`` (default
    :func:`default_citation_renderer`), is also appended to the answer text; in a stream it
    arrives as one extra text chunk at the end. Answers with tool calls and answers without
    documents are left alone.

    Default order ``LOWEST_PRECEDENCE - 200`` (the recipe's): inside the retrieval advisors, so
    their documents are already in the request. Rendering changes the answer text: do not
    combine it with ``StructuredOutputValidationAdvisor`` (whose order is lower).

    Divergences from the seed's recipe: the recipe copies document ids to the context only;
    this adds titles/sources/scores, the metadata entry, optional rendering, and works in
    streams (the recipe relies on the finish-reason-dependent ``after``, seed §6.13).
    """

    __slots__ = ("_order", "_render", "_renderer")

    DEFAULT_ORDER: ClassVar[int] = LOWEST_PRECEDENCE - 200

    def __init__(
        self,
        *,
        render: bool = False,
        renderer: Callable[[Sequence[Mapping[str, Any]]], str] | None = None,
        order: int = DEFAULT_ORDER,
    ) -> None:
        self._render = render
        self._renderer = renderer or default_citation_renderer
        self._order = order

    def citations(self, *contexts: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The citations of the first documents found in ``contexts`` (in order)."""
        for context in contexts:
            for key in DOCUMENT_KEYS:
                documents = context.get(key)
                if documents:
                    return [_citation(i, d) for i, d in enumerate(documents, 1)]
        return []

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        response: ChatClientResponse = await chain.next_call(request)
        chat_response = response.chat_response
        if chat_response is None or chat_response.has_tool_calls():
            return response
        citations = self.citations(response.context, request.context)
        if not citations:
            return response
        if self._render and chat_response.generations:
            rendered = chat_response.generations[0].text + self._renderer(citations)
            chat_response = replace_texts(chat_response, {0: rendered})
        return response.mutate(
            chat_response=chat_response.with_metadata(**{CITATIONS: citations}),
            context={CITATIONS: citations},
        )

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        accumulator = ChatResponseAccumulator()
        context: Mapping[str, Any] = request.context
        async with closing_stream(chain.next_stream(request)) as chunks:
            async for chunk in chunks:
                if chunk.chat_response is not None:
                    accumulator.add(chunk.chat_response)
                context = {**context, **chunk.context}
                yield chunk
        if accumulator.result().has_tool_calls():
            return
        citations = self.citations(context, request.context)
        if not citations:
            return
        extra = {CITATIONS: citations}
        if self._render:
            text = ChatResponse().with_metadata(**extra)
            yield ChatClientResponse(
                replace_texts(text, {0: self._renderer(citations)}), {**context, **extra}
            )
        else:
            yield metadata_chunk(context, extra)
