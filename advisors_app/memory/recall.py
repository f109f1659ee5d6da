"""Recall: keyword search over one conversation's own stored messages (issue 20, "Recall").

Two doors, one search (:func:`search_conversation`):

- the ``conversation_search`` tool (:data:`conversation_search`), which a chain enables by name,
  so the model can look up what a window or a compaction left out of its prompt. It reads the
  turn's conversation key (:data:`~advisors_app.core.attributes.CONVERSATION_ID`) and user
  (:data:`~advisors_app.core.attributes.PRINCIPAL`) from its ``ToolContext`` — the tool loop
  puts both there — and refuses a conversation whose owner is not that user;
- ``GET /api/conversations/<id>/search/?q=`` for people (``advisors_app.api.views.recall``).

**What is searched**: the ``text`` of the conversation's *user* and *assistant* messages
(:data:`SEARCHED_TYPES`). Tool responses are left out: they hold retrieved documents and tool
output rather than what was said, and every ``conversation_search`` call stores one that quotes
its hits, so searching them would make each search find its own earlier results. System
messages are the chain's instructions, not the conversation. An assistant message that only
calls tools has no text and never matches.

**How**, in up to three steps, each only when the one before found nothing:

1. PostgreSQL full-text search in the :data:`SEARCH_CONFIG` configuration (``to_tsvector`` /
   ``websearch_to_tsquery``): every word must occur, ``"quoted phrase"``, ``-excluded`` and
   ``or`` work as in a search engine, and no input is a syntax error. Ranked by ``ts_rank``
   normalised by document length (``1 + log(length)``: a long reply that repeats a word does
   not bury a short message that states the fact), ties newest first; snippets by
   ``ts_headline`` with each match between ``**`` (Markdown bold; no HTML, so nothing in the
   stored text is ever taken for markup).
2. The same with *any* of the words (``plainto_tsquery`` per word, or-ed), ranked the same way,
   so messages with more of the words come first: a model asks in sentences ("what was my
   passport number again"), and one word the message lacks must not hide it.
3. The query as a case-insensitive substring (``icontains``), rank ``0.0``, newest first:
   full-text search matches whole lexemes only, drops stop words (a query of stop words matches
   nothing) and splits code-like tokens (``AB-12x``, paths, URLs), which a literal substring
   still finds. A trigram search would need the ``pg_trgm`` extension (a migration), and
   similarity is not what someone recalling a code wants.

Steps 2 and 3 run only for queries without search syntax (quotes, ``-word``, ``or``): whoever
wrote syntax asked for exactly that.

No index serves the text search: the rows are narrowed to one conversation first (the unique
``(conversation, sequence)`` index), and the vector is computed for those rows at query time,
which is cheap for conversations of thousands of messages; a GIN expression index would only
pay off for searches across conversations, which recall never does.
"""

from __future__ import annotations

import datetime
import functools
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from django.contrib.postgres.search import SearchHeadline, SearchQuery, SearchRank, SearchVector
from django.db.models import QuerySet
from pydantic import Field

from advisors_app.core.attributes import CONVERSATION_ID, PRINCIPAL
from advisors_app.core.messages import MessageType
from advisors_app.core.tools import ToolContext, ToolRegistry, tool
from advisors_app.db.threads import db_sync_to_async
from advisors_app.models import ChatMessage, Conversation
from advisors_app.stores.memory import TURN_PENDING

__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "MAX_QUERY_CHARS",
    "SEARCHED_TYPES",
    "SEARCH_CONFIG",
    "SNIPPET_CHARS",
    "ConversationSearchError",
    "RecallHit",
    "conversation_search",
    "format_hits",
    "query_problem",
    "register_recall_tools",
    "search_conversation",
]

#: Longest query accepted, in characters (tool argument ``query``, API parameter ``q``).
MAX_QUERY_CHARS = 200
#: Hits returned when the caller names no limit.
DEFAULT_LIMIT = 5
#: Most hits one search returns.
MAX_LIMIT = 20
#: The PostgreSQL text-search configuration: English stemming ("flights" finds "flight").
SEARCH_CONFIG = "english"
#: Longest snippet, in characters (``ts_headline`` counts words, and one "word" can be long).
SNIPPET_CHARS = 240
#: The message types searched (see the module docstring for why tool responses are not).
SEARCHED_TYPES = (MessageType.USER.value, MessageType.ASSISTANT.value)

_MARK = "**"
# ts_headline marks with these (private-use characters no message holds) so that matches it
# marks back to back ("X7" and "-4431" of "X7-4431") read as one: **X7-4431**, not
# **X7****-4431** — and a "****" the text itself holds is left alone.
_START, _STOP = "\ue000", "\ue001"
_ELLIPSIS = "…"
# Phrases, exclusions and "or": the query is websearch syntax, not a literal to look for.
_SEARCH_SYNTAX = re.compile(r'"|(?:^|\s)-\S|(?:^|\s)or(?:\s|$)', re.IGNORECASE)


class ConversationSearchError(RuntimeError):
    """Raised by ``conversation_search`` when its tool context names no user, no conversation,
    or a conversation that user does not own."""


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One message found: its id, ``sequence`` in the conversation, ``role`` (``"user"`` or
    ``"assistant"``), a ``snippet`` (at most :data:`SNIPPET_CHARS` characters, matches between
    ``**``), the ``rank`` (``ts_rank``, higher is better; ``0.0`` for a substring match) and
    when it was stored."""

    message_id: int
    sequence: int
    role: str
    snippet: str
    rank: float
    created_at: datetime.datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "message_id": self.message_id,
            "sequence": self.sequence,
            "role": self.role,
            "snippet": self.snippet,
            "rank": self.rank,
            "created_at": self.created_at,
        }


def query_problem(query: str) -> str | None:
    """Why ``query`` cannot be searched (blank, or over :data:`MAX_QUERY_CHARS` characters),
    or ``None``."""
    if not query.strip():
        return "Enter something to search for (the query is blank)."
    if len(query) > MAX_QUERY_CHARS:
        return f"Use at most {MAX_QUERY_CHARS} characters (this query has {len(query)})."
    return None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip(snippet: str) -> str:
    snippet = _one_line(snippet)
    if len(snippet) <= SNIPPET_CHARS:
        return snippet
    return snippet[: SNIPPET_CHARS - 1].rstrip() + _ELLIPSIS


def _substring_snippet(text: str, needle: str) -> str:
    """A window of ``text`` around the first case-insensitive ``needle``, the match marked."""
    text = _one_line(text)
    found = re.search(re.escape(_one_line(needle)), text, re.IGNORECASE)
    if found is None:  # only whitespace differed; show the start
        return _clip(text)
    room = max(SNIPPET_CHARS - len(found.group()) - 2 * len(_MARK) - 2, 0)
    start = max(found.start() - room // 2, 0)
    end = min(found.end() + room - (found.start() - start), len(text))
    marked = text[start : found.start()] + _MARK + found.group() + _MARK + text[found.end() : end]
    return (_ELLIPSIS if start else "") + marked + (_ELLIPSIS if end < len(text) else "")


def search_conversation(
    conversation_pk: int, query: str, limit: int = DEFAULT_LIMIT
) -> list[RecallHit]:
    """The best ``limit`` (1 to :data:`MAX_LIMIT`) user and assistant messages of conversation
    ``conversation_pk`` matching ``query`` (websearch syntax), best first.

    Blocking; one query, up to three when full-text search finds nothing (the fallbacks of the
    module docstring). The caller has checked who owns the conversation. Raises
    ``ValueError`` for a blank or over-long query or a limit out of range.
    """
    problem = query_problem(query)
    if problem is not None:
        raise ValueError(problem)
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, not {limit}")
    query = query.strip()
    rows = (
        ChatMessage.objects.filter(conversation_id=conversation_pk, message_type__in=SEARCHED_TYPES)
        .exclude(text="")
        # A turn's own message, stored before it ran, or one never answered: not history.
        .exclude(metadata__has_key=TURN_PENDING)
    )
    hits = _ranked(rows, SearchQuery(query, config=SEARCH_CONFIG, search_type="websearch"), limit)
    if hits or _SEARCH_SYNTAX.search(query):
        return hits
    words = query.split()
    if len(words) > 1:
        any_word = functools.reduce(
            operator.or_, (SearchQuery(word, config=SEARCH_CONFIG) for word in words)
        )
        hits = _ranked(rows, any_word, limit)
        if hits:
            return hits
    literal = (
        rows.filter(text__icontains=query)
        .order_by("-sequence")
        .values_list("pk", "sequence", "message_type", "text", "created_at")[:limit]
    )
    return [
        RecallHit(pk, sequence, role, _substring_snippet(text, query), 0.0, created_at)
        for pk, sequence, role, text, created_at in literal
    ]


def _ranked(rows: QuerySet[ChatMessage], search: SearchQuery, limit: int) -> list[RecallHit]:
    """The best ``limit`` of ``rows`` matching ``search``, with ``ts_headline`` snippets."""
    vector = SearchVector("text", config=SEARCH_CONFIG)
    found = (
        rows.annotate(document=vector)
        .filter(document=search)
        .annotate(
            rank=SearchRank(vector, search, normalization=1),
            snippet=SearchHeadline(
                "text",
                search,
                config=SEARCH_CONFIG,
                start_sel=_START,
                stop_sel=_STOP,
                max_words=35,
                min_words=15,
            ),
        )
        .order_by("-rank", "-sequence")
        .values_list("pk", "sequence", "message_type", "snippet", "rank", "created_at")[:limit]
    )
    return [
        RecallHit(pk, sequence, role, _clip(_marked(snippet)), float(rank), created_at)
        for pk, sequence, role, snippet, rank, created_at in found
    ]


def _marked(headline: str) -> str:
    """``ts_headline``'s output with adjacent matches merged and each marked with ``**``."""
    merged = headline.replace(_STOP + _START, "")
    return merged.replace(_START, _MARK).replace(_STOP, _MARK)


def format_hits(query: str, hits: list[RecallHit]) -> str:
    """The tool's answer: one line per hit, ``[#<sequence> <role>, <UTC time>] <snippet>``."""
    if not hits:
        return f"No message of this conversation matches {query.strip()!r}."
    lines = [
        f"[#{hit.sequence} {hit.role}, "
        f"{hit.created_at.astimezone(datetime.UTC):%Y-%m-%d %H:%M} UTC] {hit.snippet}"
        for hit in hits
    ]
    if len(hits) == 1:
        found = "1 message of this conversation matches"
    else:
        found = f"{len(hits)} messages of this conversation match"
    return f"{found} {query.strip()!r}, best first:\n" + "\n".join(lines)


def _owned_conversation_pk(context: Mapping[str, Any]) -> int | None:
    """The pk of the turn's conversation if the turn's user owns it; ``None`` if it is not
    stored yet. Raises :class:`ConversationSearchError` otherwise (blocking)."""
    user = context.get(PRINCIPAL)
    if user is None or getattr(user, "pk", None) is None:
        raise ConversationSearchError(
            f"no user to act for: the tool context has no saved user under {PRINCIPAL!r} "
            "(conversation_search needs a signed-in user's turn)"
        )
    key = context.get(CONVERSATION_ID)
    if not isinstance(key, str) or not key:
        raise ConversationSearchError(
            f"no conversation to search: the tool context has no conversation id under "
            f"{CONVERSATION_ID!r} (conversation_search needs a turn of a stored conversation)"
        )
    row = Conversation.objects.filter(conversation_id=key).values_list("pk", "owner_id").first()
    if row is None:
        return None
    pk, owner_id = row
    if owner_id != user.pk:
        # Say nothing about the conversation: not even whether it exists.
        raise ConversationSearchError(
            "conversation_search may only read a conversation of the turn's own user"
        )
    return int(pk)


def _search_for_context(query: str, limit: int, context: Mapping[str, Any]) -> str:
    problem = query_problem(query)
    if problem is not None:
        raise ValueError(problem)
    pk = _owned_conversation_pk(context)
    hits = [] if pk is None else search_conversation(pk, query, limit)
    return format_hits(query, hits)


@tool(
    name="conversation_search",
    description="Search the earlier messages of this conversation by keywords, when the user "
    "refers to something said before that is not in the messages you see. Supports "
    '"quoted phrases", -excluded words and or. Returns the best matching messages with their '
    "position (#sequence), role, time and a snippet (matches in **bold**).",
)
async def conversation_search(
    query: Annotated[
        str,
        Field(
            description="Keywords to look for, e.g. flight number Lisbon",
            max_length=MAX_QUERY_CHARS,
        ),
    ],
    limit: Annotated[
        int, Field(description="How many messages to return, best first", ge=1, le=MAX_LIMIT)
    ] = DEFAULT_LIMIT,
    *,
    context: ToolContext,
) -> str:
    """Search the turn's own conversation (its user and assistant messages) for ``query``.

    Returns :func:`format_hits` text. Raises ``ValueError`` for a blank query and
    :class:`ConversationSearchError` without a user or a conversation in the context, or for a
    conversation of another user (the tool loop sends either back to the model as the tool's
    error). Over-long queries and limits outside 1–:data:`MAX_LIMIT` are refused by the
    argument schema.
    """
    return await db_sync_to_async(_search_for_context)(query, limit, context)


def register_recall_tools(registry: ToolRegistry | None = None) -> None:
    """Register :data:`conversation_search` (default: in the project tool registry);
    idempotent."""
    from advisors_app.definition.tools import tool_registry

    # Not `registry or ...`: an empty registry is falsy (it has a length).
    target = tool_registry if registry is None else registry
    target.register(conversation_search, replace=True)
