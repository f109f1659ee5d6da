"""Query transformers: rewrite, compress (with history) or translate a query with the model.

Spring AI ``org.springframework.ai.rag.preretrieval.query.transformation``. Each transformer
sends its template, rendered in a single pass, as the **user** message of one model call and
returns ``query.mutate(text=answer)`` (history and context kept); a blank answer returns the
query unchanged. Divergences: answers are stripped (defect 5.6.45); templates are checked for
real ``{name}`` placeholders, not substrings (defect 5.6.38); the compression transformer never
repeats the current question in the history (defect 5.6.44, bug case B22).
"""

from __future__ import annotations

from typing import Any

from ..messages import MessageType
from ..prompt import ChatOptions
from ..templates import PromptTemplate
from ._llm import as_chat_client, ask
from .query import Query

__all__ = [
    "CompressionQueryTransformer",
    "QueryTransformer",
    "RewriteQueryTransformer",
    "TranslationQueryTransformer",
]

REWRITE_PROMPT_TEMPLATE = """\
Given a user query, rewrite it to provide better results when querying a {target}.
Remove any irrelevant information, and ensure the query is concise and specific.

Original query:
{query}

Rewritten query:
"""

COMPRESSION_PROMPT_TEMPLATE = """\
Given the following conversation history and a follow-up query, your task is to synthesize
a concise, standalone query that incorporates the context from the history.
Ensure the standalone query is clear, specific, and maintains the user's intent.

Conversation history:
{history}

Follow-up query:
{query}

Standalone query:
"""

TRANSLATION_PROMPT_TEMPLATE = """\
Given a user query, translate it to {targetLanguage}.
If the query is already in {targetLanguage}, return it unchanged.
If you don't know the language of the query, return it unchanged.
Do not add explanations nor any other text.

Original query: {query}

Translated query:
"""


def _template(template: str | PromptTemplate | None, default: str, *names: str) -> PromptTemplate:
    if template is None:
        return PromptTemplate(default, required=names)
    text = template.template if isinstance(template, PromptTemplate) else template
    return PromptTemplate(text, required=names)


def _check(query: Query) -> Query:
    if query is None:
        raise ValueError("query cannot be null")
    return query


class QueryTransformer:
    """Turns a :class:`Query` into a better one for retrieval: ``await transform(query)``."""

    __slots__ = ()

    async def transform(self, query: Query) -> Query:
        raise NotImplementedError


class RewriteQueryTransformer(QueryTransformer):
    """Rewrites the query for a search system (Spring AI ``RewriteQueryTransformer``).

    ``chat_client`` is a ``ChatClient`` or a chat model; ``target_search_system`` defaults to
    ``"vector store"``; a custom ``prompt_template`` needs ``{target}`` and ``{query}``.
    """

    __slots__ = ("chat_client", "options", "prompt_template", "target_search_system")

    def __init__(
        self,
        chat_client: Any,
        prompt_template: str | PromptTemplate | None = None,
        target_search_system: str = "vector store",
        *,
        options: ChatOptions | None = None,
    ) -> None:
        self.chat_client = as_chat_client(chat_client, "RewriteQueryTransformer")
        self.prompt_template = _template(
            prompt_template, REWRITE_PROMPT_TEMPLATE, "target", "query"
        )
        if not isinstance(target_search_system, str) or not target_search_system.strip():
            raise ValueError("targetSearchSystem cannot be null or empty")
        self.target_search_system = target_search_system
        self.options = options

    async def transform(self, query: Query) -> Query:
        _check(query)
        text = self.prompt_template.render(target=self.target_search_system, query=query.text)
        answer = await ask(self.chat_client, text, self.options, query.context)
        return query if answer is None else query.mutate(text=answer)


def format_history(query: Query) -> str:
    """``"USER: ..."`` / ``"ASSISTANT: ..."`` lines of the history, without the current question.

    Only user and assistant messages count. A trailing user message whose text is the query's
    own text is the current question (Spring passes the whole prompt as history) and is left
    out, so the follow-up appears once, under "Follow-up query" (bug case B22).
    """
    messages = [
        m for m in query.history if m.message_type in (MessageType.USER, MessageType.ASSISTANT)
    ]
    current = messages[-1] if messages else None
    is_question = current is not None and current.message_type is MessageType.USER
    if is_question and current.text.strip() == query.text.strip():  # type: ignore[union-attr]
        messages.pop()
    return "\n".join(f"{m.message_type.name}: {m.text}" for m in messages)


class CompressionQueryTransformer(QueryTransformer):
    """Makes a follow-up question standalone using the history (``CompressionQueryTransformer``).

    ``chat_client`` is a ``ChatClient`` or a chat model; a custom ``prompt_template`` needs
    ``{history}`` and ``{query}``. See :func:`format_history` for the history rendering.
    """

    __slots__ = ("chat_client", "options", "prompt_template")

    def __init__(
        self,
        chat_client: Any,
        prompt_template: str | PromptTemplate | None = None,
        *,
        options: ChatOptions | None = None,
    ) -> None:
        self.chat_client = as_chat_client(chat_client, "CompressionQueryTransformer")
        self.prompt_template = _template(
            prompt_template, COMPRESSION_PROMPT_TEMPLATE, "history", "query"
        )
        self.options = options

    async def transform(self, query: Query) -> Query:
        _check(query)
        text = self.prompt_template.render(history=format_history(query), query=query.text)
        answer = await ask(self.chat_client, text, self.options, query.context)
        return query if answer is None else query.mutate(text=answer)


class TranslationQueryTransformer(QueryTransformer):
    """Translates the query into ``target_language`` (``TranslationQueryTransformer``).

    ``target_language`` is required ("targetLanguage cannot be null or empty"); a custom
    ``prompt_template`` needs ``{targetLanguage}`` and ``{query}``.
    """

    __slots__ = ("chat_client", "options", "prompt_template", "target_language")

    def __init__(
        self,
        chat_client: Any,
        target_language: str | None = None,
        prompt_template: str | PromptTemplate | None = None,
        *,
        options: ChatOptions | None = None,
    ) -> None:
        self.chat_client = as_chat_client(chat_client, "TranslationQueryTransformer")
        if not isinstance(target_language, str) or not target_language.strip():
            raise ValueError("targetLanguage cannot be null or empty")
        self.target_language = target_language
        self.prompt_template = _template(
            prompt_template, TRANSLATION_PROMPT_TEMPLATE, "targetLanguage", "query"
        )
        self.options = options

    async def transform(self, query: Query) -> Query:
        _check(query)
        text = self.prompt_template.render(targetLanguage=self.target_language, query=query.text)
        answer = await ask(self.chat_client, text, self.options, query.context)
        return query if answer is None else query.mutate(text=answer)
