"""Query augmentation: put the retrieved documents into the user's query.

Spring AI ``ContextualQueryAugmenter``, and the document formatters every advisor that puts
retrieved or remembered text into a prompt shares (:data:`DOCUMENT_FORMATTERS`): by default each
document is one XML element whose text is escaped, so a document cannot close the block it sits
in, open another, or imitate the template's own delimiters from outside its element (issue 18).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from xml.sax.saxutils import escape

from ..templates import PromptTemplate
from ..vectorstore import Document
from .query import Query

__all__ = [
    "DEFAULT_DOCUMENT_FORMAT",
    "DOCUMENT_FORMATTERS",
    "ContextualQueryAugmenter",
    "DocumentFormatter",
    "QueryAugmenter",
    "document_formatter",
    "join_document_texts",
    "xml_document_formatter",
    "xml_element",
    "xml_source_document_formatter",
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

#: ``formatter(documents) -> text``: how documents are written into a prompt.
DocumentFormatter = Callable[[Sequence[Document]], str]

_QUOTES = {'"': "&quot;", "'": "&apos;"}


def xml_element(tag: str, text: str, attributes: Mapping[str, str] | None = None) -> str:
    """``<tag a="v">text</tag>``: ``& < >`` escaped in ``text``, ``& < > " '`` in each value.

    The one escaping rule of the prompts built here (retrieved documents, long-term memory
    entries): whatever a document or a remembered message holds, it stays text *inside* its
    element. Quotes are left alone in element text, where they cannot end anything: escaped,
    they come back in a small model's answers (SmolLM2-135M wrote ``The &quot;with&quot;
    statement`` for 3 of 3 demo questions). ``tag`` and the attribute names are the caller's
    constants and are not escaped.
    """
    attrs = "".join(
        f' {name}="{escape(str(value), _QUOTES)}"' for name, value in (attributes or {}).items()
    )
    return f"<{tag}{attrs}>{escape(text)}</{tag}>"


def join_document_texts(documents: Sequence[Document]) -> str:
    """The documents' texts joined with ``"\\n"``, raw (Spring AI's default formatter).

    Only for documents as trusted as the prompt template itself: a document can close the
    context block and write instructions after it.
    """
    return "\n".join(d.text for d in documents)


def xml_document_formatter(documents: Sequence[Document]) -> str:
    """One ``<document>…</document>`` element per document, XML-escaped (``& < >``), joined
    by ``"\\n"``.

    Whatever a document holds (``</context>``, ``</document>``, a ``-----`` line, "ignore all
    previous instructions") stays text inside its own element: it cannot close the element or
    the block around it. The default of every retrieval advisor here (``"xml"`` in
    :data:`DOCUMENT_FORMATTERS`).
    """
    return "\n".join(xml_element("document", d.text) for d in documents)


def xml_source_document_formatter(documents: Sequence[Document]) -> str:
    """As :func:`xml_document_formatter`, with ``source="…"`` (escaped) when the document's
    metadata has a ``source`` (an ingested file's name) or else a ``title``."""
    lines = []
    for d in documents:
        source = d.metadata.get("source") or d.metadata.get("title")
        lines.append(xml_element("document", d.text, {"source": source} if source else None))
    return "\n".join(lines)


#: The document formatters by name, as the advisor types' ``document_format`` param offers them.
DOCUMENT_FORMATTERS: Mapping[str, DocumentFormatter] = MappingProxyType(
    {
        "xml": xml_document_formatter,
        "xml_with_source": xml_source_document_formatter,
        "plain": join_document_texts,
    }
)
#: The default name in :data:`DOCUMENT_FORMATTERS`.
DEFAULT_DOCUMENT_FORMAT = "xml"


def document_formatter(name: str) -> DocumentFormatter:
    """The formatter :data:`DOCUMENT_FORMATTERS` names; ``ValueError`` listing the names."""
    try:
        return DOCUMENT_FORMATTERS[name]
    except (KeyError, TypeError):
        known = ", ".join(DOCUMENT_FORMATTERS)
        raise ValueError(f"unknown document format {name!r}; known: {known}") from None


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
    template, verbatim) rendered with the query text and ``document_formatter(documents)``.
    With no documents: ``allow_empty_context=False`` (default) gives the
    ``empty_context_prompt_template`` text (default: the user is told politely the question is
    outside the knowledge base; a custom one may use ``{query}``); ``allow_empty_context=True``
    returns the query unchanged (bug case B21). Rendering is single-pass: braces in documents
    or user text stay text.

    Divergences, each a fix: the default ``document_formatter`` is
    :func:`xml_document_formatter` (one escaped ``<document>`` element per document, issue 18):
    Spring joins the raw texts with ``"\\n"``, so a document holding ``</context>`` or a
    ``-----`` line closes the context block and writes instructions after it; pass
    ``document_formatter=join_document_texts`` for Spring's exact text. The augmented query
    keeps the original history and context (Spring drops them, defect 5.6.43).
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
        self.document_formatter = document_formatter or xml_document_formatter

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
