"""``RegexToolIndex``: keyword matching with regular expressions (Spring AI ``RegexToolIndex``).

The query is lower-cased and split on whitespace and punctuation; tokens shorter than two
characters and English stop words are dropped (all tokens are kept if that drops everything);
the distinct tokens become one case-insensitive alternation ``(t1|t2|...)`` of at most 200
characters (trailing tokens are dropped). A blank query matches every tool. Score per tool:
``2 * name_matches + 1 / (1 + 0.1 * first_name_match)`` plus
``description_matches + 0.5 / (1 + 0.1 * first_description_match)``; tools scoring 0 are left
out; ties keep indexing order.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .index import (
    DEFAULT_MAX_RESULTS,
    SessionStore,
    ToolReference,
    ToolSearchRequest,
    ToolSearchResponse,
    limit_of,
)

__all__ = ["STOP_WORDS", "RegexToolIndex"]

_SPLIT = re.compile(r"""[\s,;:.!?()\[\]{}"']+""")
_MAX_PATTERN = 200

# Words that say nothing about which tool is wanted.
STOP_WORDS = frozenset(
    """
    a an and are as at be but by can could do does for from get how i if in into is it its me my
    of on or please should so some that the their them then there these this to tool tools use
    want was we what when where which who will with would you your
    """.split()  # noqa: SIM905 - a word list reads better as text
)


def query_pattern(query: str) -> re.Pattern[str]:
    """The case-insensitive alternation a query becomes (``.*`` for a blank query)."""
    raw = [t for t in _SPLIT.split(query.lower()) if t]
    if not raw:
        return re.compile(".*", re.DOTALL)
    kept = [t for t in raw if len(t) >= 2 and t not in STOP_WORDS] or raw
    alternatives: list[str] = []
    length = 2  # the parentheses
    for token in dict.fromkeys(kept):
        escaped = re.escape(token)
        extra = len(escaped) + (1 if alternatives else 0)
        if alternatives and length + extra > _MAX_PATTERN:
            break
        alternatives.append(escaped)
        length += extra
    return re.compile("(" + "|".join(alternatives) + ")", re.IGNORECASE)


def _score(pattern: re.Pattern[str], text: str, per_match: float, first_weight: float) -> float:
    matches = list(pattern.finditer(text))
    if not matches:
        return 0.0
    return per_match * len(matches) + first_weight / (1 + 0.1 * matches[0].start())


class RegexToolIndex:
    """A ``ToolIndex`` that needs nothing but the standard library; ``max_results`` default 10."""

    def __init__(self, max_results: int = DEFAULT_MAX_RESULTS) -> None:
        self.max_results = max_results
        self._store: SessionStore[dict[str, ToolReference]] = SessionStore()

    async def index_tools(self, session_id: str, tools: Sequence[ToolReference]) -> None:
        tools_by_name = dict(self._store.get(session_id) or {})
        tools_by_name.update((reference.name, reference) for reference in tools)
        self._store.put(session_id, tools_by_name)

    async def clear_index(self, session_id: str) -> None:
        self._store.pop(session_id)

    async def search(self, request: ToolSearchRequest) -> ToolSearchResponse:
        tools = self._store.get(request.session_id) if request.session_id else None
        if not tools:
            return ToolSearchResponse()
        pattern = query_pattern(request.query or "")
        scored = []
        for reference in tools.values():
            score = _score(pattern, reference.name, 2.0, 1.0) + _score(
                pattern, reference.summary, 1.0, 0.5
            )
            if score > 0:
                scored.append((score, reference))
        scored.sort(key=lambda pair: -pair[0])  # stable: ties keep indexing order
        limit = limit_of(request, self.max_results)
        return ToolSearchResponse(tuple(r for _, r in scored[:limit]), len(scored))
