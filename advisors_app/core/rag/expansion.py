"""Query expansion: one query becomes several search variants (Spring AI ``MultiQueryExpander``)."""

from __future__ import annotations

import re
from typing import Any

from ..prompt import ChatOptions
from ..templates import PromptTemplate
from ._llm import as_chat_client, ask
from .query import Query
from .transformers import _template

__all__ = ["MultiQueryExpander", "QueryExpander"]

MULTI_QUERY_PROMPT_TEMPLATE = """\
You are an expert at information retrieval and search optimization.
Your task is to generate {number} different versions of the given query.

Each variant must cover different perspectives or aspects of the topic,
while maintaining the core intent of the original query. The goal is to
expand the search space and improve the chances of finding relevant information.

Do not explain your choices or add any other text.
Provide the query variants separated by newlines.

Original query: {query}

Query variants:
"""

# "1. x", "2) x", "- x", "* x", "• x": list markers models add despite the instructions.
_LIST_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")


class QueryExpander:
    """Turns a :class:`Query` into a list of queries: ``await expand(query)``."""

    __slots__ = ()

    async def expand(self, query: Query) -> list[Query]:
        raise NotImplementedError


class MultiQueryExpander(QueryExpander):
    """Asks the model for ``number_of_queries`` variants of the query, one per line.

    Returns the original query first (``include_original=True``, the default) followed by the
    variants, each ``query.mutate(text=variant)``; a blank answer returns ``[query]``. A custom
    ``prompt_template`` needs ``{number}`` and ``{query}``.

    Divergences (defect 5.6.45): ``"\\r\\n"`` is normalised, lines are stripped, blank lines and
    list markers (``1.``, ``-``) are dropped *before* counting; extra lines are cut to
    ``number_of_queries`` and fewer lines are kept (Spring discards every variant on any count
    mismatch); variants equal to the original or to an earlier variant are dropped, so the
    list never holds the same query twice (defect 5.6.40).
    """

    __slots__ = (
        "chat_client",
        "include_original",
        "number_of_queries",
        "options",
        "prompt_template",
    )

    def __init__(
        self,
        chat_client: Any,
        prompt_template: str | PromptTemplate | None = None,
        include_original: bool = True,
        number_of_queries: int = 3,
        *,
        options: ChatOptions | None = None,
    ) -> None:
        self.chat_client = as_chat_client(chat_client, "MultiQueryExpander")
        self.prompt_template = _template(
            prompt_template, MULTI_QUERY_PROMPT_TEMPLATE, "number", "query"
        )
        if isinstance(number_of_queries, bool) or not isinstance(number_of_queries, int):
            raise ValueError("numberOfQueries must be greater than 0")
        if number_of_queries < 1:
            raise ValueError("numberOfQueries must be greater than 0")
        self.include_original = include_original
        self.number_of_queries = number_of_queries
        self.options = options

    async def expand(self, query: Query) -> list[Query]:
        if query is None:
            raise ValueError("query cannot be null")
        text = self.prompt_template.render(number=self.number_of_queries, query=query.text)
        answer = await ask(self.chat_client, text, self.options, query.context)
        if answer is None:
            return [query]
        seen = {query.text.strip()}
        variants: list[Query] = []
        for line in answer.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            variant = _LIST_MARKER.sub("", line).strip()
            if not variant or variant in seen:
                continue
            seen.add(variant)
            variants.append(query.mutate(text=variant))
            if len(variants) == self.number_of_queries:
                break
        return [query, *variants] if self.include_original else variants or [query]
