"""``KeywordToolIndex``: BM25 ranking with ``bm25s`` (the role of Spring AI's ``LuceneToolIndex``).

Each tool is a document made of its name split into words (``getWeather`` and ``get_weather``
both give ``get weather``), written twice so name words weigh more (Lucene boosts the name), and
its description. Text is lower-cased, split into words of two or more characters, and English
stop words are dropped. Tools whose BM25 score is not above ``min_score`` are left out (BM25
scores are unbounded, so the default is 0: any matching word); ties keep indexing order. A query
with no usable word matches every tool, as the regex index's blank query does. Indexing runs in
a worker thread.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .index import (
    DEFAULT_MAX_RESULTS,
    SessionStore,
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    limit_of,
)

__all__ = ["KeywordToolIndex"]

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_WORD = re.compile(r"(?u)\b\w\w+\b")


def _words(text: str) -> list[str]:
    return _WORD.findall(_CAMEL.sub(" ", text).replace("_", " ").lower())


def _tokens(text: str) -> list[str]:
    stop = _stop_words()
    return [w for w in _words(text) if w not in stop]


@functools.cache
def _stop_words() -> frozenset[str]:
    # bm25s (and what it imports) loads on first use, not with the tool-search advisor class.
    import bm25s

    return frozenset(bm25s.stopwords.STOPWORDS_EN)


@dataclass(frozen=True, slots=True)
class _Session:
    tools: tuple[ToolReference, ...]
    retriever: Any


def _build(tools: tuple[ToolReference, ...]) -> _Session:
    import bm25s

    corpus = []
    for reference in tools:
        name = _tokens(reference.name)
        corpus.append([*name, *name, *_tokens(reference.summary)] or ["_"])
    retriever = bm25s.BM25()
    retriever.index(corpus, show_progress=False)
    return _Session(tools, retriever)


class KeywordToolIndex:
    """A ``ToolIndex`` ranking by BM25; ``max_results`` default 10, ``min_score`` default 0."""

    def __init__(self, max_results: int = DEFAULT_MAX_RESULTS, min_score: float = 0.0) -> None:
        self.max_results = max_results
        self.min_score = min_score
        self._store: SessionStore[_Session] = SessionStore()

    async def index_tools(self, session_id: str, tools: Sequence[ToolReference]) -> None:
        current = self._store.get(session_id)
        by_name = {r.name: r for r in (current.tools if current else ())}
        by_name.update((r.name, r) for r in tools)
        if not by_name:
            self._store.pop(session_id)
            return
        self._store.put(session_id, await asyncio.to_thread(_build, tuple(by_name.values())))

    async def clear_index(self, session_id: str) -> None:
        self._store.pop(session_id)

    async def search(self, request: ToolSearchRequest) -> ToolSearchResponse:
        session = self._store.get(request.session_id) if request.session_id else None
        if session is None:
            return ToolSearchResponse()
        limit = limit_of(request, self.max_results)
        query = _tokens(request.query or "")
        if not query:
            return ToolSearchResponse(session.tools[:limit], len(session.tools))
        scores = session.retriever.get_scores(query)
        ranked = sorted(
            (i for i in range(len(session.tools)) if scores[i] > self.min_score),
            key=lambda i: -float(scores[i]),
        )
        return ToolSearchResponse(tuple(session.tools[i] for i in ranked[:limit]), len(ranked))
