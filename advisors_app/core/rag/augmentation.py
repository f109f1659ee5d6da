"""Query augmentation: put the retrieved documents into the user's query.

Spring AI ``ContextualQueryAugmenter``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from xml.sax.saxutils import escape

from ..templates import PromptTemplate
from ..vectorstore import Document
from .query import Query

__all__ = [
    "ContextualQueryAugmenter",
    "QueryAugmenter",
    "join_document_texts",
    "xml_document_formatter",
]

DEFAULT_PROMPT_TEMPLATE = """\
Context information is below.

---------------------
{context}
---------------------

Given the context information and no prior knowledge, answer the query.

Follow these rules:

1. If the answer is not in the context, just say that you don't know.
2. Avoid statements like "Based on the context..." or "The provided information...".

Query: {query}

Answer:
"""

DEFAULT_EMPTY_CONTEXT_PROMPT_TEMPLATE = """\
The user query is outside your knowledge base.
Politely inform the user that you can't answer it.
"""

DocumentFormatter = Callable[[Sequence[Document]], str]

_XML_ENTITIES = {'"': "&quot;", "'": "&apos;"}


def join_document_texts(documents: Sequence[Document]) -> str:
    """The documents' texts joined with ``"\\n"`` (Spring AI's default formatter)."""
    return "\n".join(d.text for d in documents)


def xml_document_formatter(documents: Sequence[Document]) -> str:
    """One ``<document>…</document>`` line per document, XML-escaped (``& < > " '``).

    Retrieved text can then not close the block it sits in nor imitate its delimiters.
    """
    return "\n".join(f"<document>{escape(d.text, _XML_ENTITIES)}</document>" for d in documents)


class QueryAugmenter:
    """Adds retrieved documents to a query: ``augment(query, documents)``."""

    __slots__ = ()

    def augment(self, query: Query, documents: Sequence[Document]) -> Query:
        raise NotImplementedError


def _template(template: str | PromptTemplate | None, default: str, *names: str) -> PromptTemplate:
    if template is None:
        return PromptTemplate(default)
    text = template.template if isinstance(template, PromptTemplate) else template
    return PromptTemplate(text, required=names)


class ContextualQueryAugmenter(QueryAugmenter):
    """Renders the query and the documents into a context prompt (``ContextualQueryAugmenter``).

    With documents: ``prompt_template`` (needs ``{query}`` and ``{context}``; default Spring's
    template, verbatim) rendered with the query text and ``document_formatter(documents)``
    (default: texts joined with ``"\\n"``, as Spring; :func:`xml_document_formatter` escapes
    and delimits them). With no documents: ``allow_empty_context=False`` (default) gives the
    ``empty_context_prompt_template`` text (default: the user is told politely the question is
    outside the knowledge base; a custom one may use ``{query}``); ``allow_empty_context=True``
    returns the query unchanged (bug case B21). Rendering is single-pass: braces in documents
    or user text stay text. Divergence: the augmented query keeps the original history and
    context (Spring drops them, defect 5.6.43).
    """

    __slots__ = (
        "allow_empty_context",
        "document_formatter",
        "empty_context_prompt_template",
        "prompt_template",
    )

    def __init__(
        self,
        prompt_template: str | PromptTemplate | None = None,
        empty_context_prompt_template: str | PromptTemplate | None = None,
        allow_empty_context: bool = False,
        document_formatter: DocumentFormatter | None = None,
    ) -> None:
        self.prompt_template = _template(
            prompt_template, DEFAULT_PROMPT_TEMPLATE, "query", "context"
        )
        self.empty_context_prompt_template = _template(
            empty_context_prompt_template, DEFAULT_EMPTY_CONTEXT_PROMPT_TEMPLATE
        )
        self.allow_empty_context = bool(allow_empty_context)
        self.document_formatter = document_formatter or join_document_texts

    def augment(self, query: Query, documents: Sequence[Document]) -> Query:
        if query is None:
            raise ValueError("query cannot be null")
        if documents is None:
            raise ValueError("documents cannot be null")
        if not documents:
            if self.allow_empty_context:
                return query
            return query.mutate(text=self.empty_context_prompt_template.render(query=query.text))
        text = self.prompt_template.render(
            query=query.text, context=self.document_formatter(documents)
        )
        return query.mutate(text=text)
