"""``SemanticCacheAdvisor``: answer similar questions from a cache (Spring AI
``SemanticCacheAdvisor``).

Seed §6.10, reference §3.17. The last user message is looked up in a
:class:`~advisors_app.core.cache.SemanticCache`; a hit returns the cached answer without calling
the rest of the chain (usage zero, metadata ``semantic_cache_hit=True`` and the similarity); a
miss runs the chain and stores the answer. Streams: a hit is one chunk; a miss streams through
and stores the aggregated answer once the stream completes normally.

The lookup is confined to a **scope**: the SHA-256 of the system messages, the options (model
included), the tool set (names, descriptions, schemas), the owner (context key
:data:`~advisors_app.core.attributes.OWNER`, a user or tenant id), the earlier messages of
the prompt (so a follow-up such as "yes" only matches the same conversation state) and an
optional ``namespace`` (for example the chain, when requests rely on the model's default
options). One owner's answers are never served to another.

Divergences from Spring AI, each a fix:

* not a ``MemoryAdvisor`` (defect 5.7.49), so it never switches the tool loop's history mode;
* the scope above instead of the system-prompt hash alone, applied always (defect 5.7.50);
  without an owner the cache is bypassed unless ``allow_shared=True``;
* default order ``DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER + 50``: inside the memory advisors
  (it sees the history they add, and memory records cached answers as normal turns) and
  outside the tool loop (a hit skips the tools);
* not cached: answers cut short or refused (finish reasons such as ``LENGTH``,
  ``CONTENT_FILTER``, ``toolCallLimitExceeded``), tool calls, empty answers, prompts with
  attachments, and, unless ``cache_tool_turns=True``, turns in which tools ran (their side
  effects would be skipped on a hit);
* cache failures are logged and count as misses (``fail_open=True``): the cache never takes
  the chat down.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, ClassVar

from ..advisor import DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER, AdvisorRole, CallAdvisor, StreamAdvisor
from ..aggregation import ChatClientResponseAccumulator
from ..attributes import OWNER
from ..cache import CacheHit, SemanticCache
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..messages import SystemMessage, UserMessage
from ..prompt import ToolCallingChatOptions
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..streams import closing_stream
from .tool_calling import ROUND_USAGES

__all__ = [
    "CACHE_HIT",
    "CACHE_QUERY",
    "CACHE_SIMILARITY",
    "UNCACHEABLE_FINISH_REASONS",
    "SemanticCacheAdvisor",
    "cache_scope",
]

logger = logging.getLogger(__name__)

#: Response-metadata keys of a cached answer.
CACHE_HIT = "semantic_cache_hit"
CACHE_SIMILARITY = "semantic_cache_similarity"
CACHE_QUERY = "semantic_cache_query"

#: Finish reasons (compared case-insensitively) of answers that are cut short or refused.
UNCACHEABLE_FINISH_REASONS = frozenset(
    {
        "length",
        "max_tokens",
        "content_filter",
        "safety",
        "recitation",
        "refusal",
        "blocklist",
        "prohibited_content",
        "spii",
        "error",
        "toolcalllimitexceeded",
        "returndirect",
        "interrupted",
    }
)


def _last_user(request: ChatClientRequest) -> tuple[int, UserMessage | None]:
    messages = request.prompt.instructions
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, UserMessage):
            return i, message
    return -1, None


def cache_scope(request: ChatClientRequest, owner: str, namespace: str = "") -> str:
    """The scope (64 hex characters) a request's cache entries live in; see the module doc."""
    messages = request.prompt.instructions
    index, _ = _last_user(request)
    options = request.prompt.options
    tools: list[Any] = []
    if isinstance(options, ToolCallingChatOptions):
        tools = sorted(
            [cb.name, cb.definition.description, cb.definition.input_schema_json]
            for cb in options.tool_callbacks
        )
        tools += sorted(["name", name] for name in options.tool_names)
    payload = {
        "namespace": namespace,
        "owner": owner,
        "system": [m.text for m in messages if isinstance(m, SystemMessage)],
        "history": [m.to_dict() for m in messages[:index] if not isinstance(m, SystemMessage)],
        "options": options.to_dict() if options is not None else {},
        "tools": tools,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


class SemanticCacheAdvisor(CallAdvisor, StreamAdvisor):
    """Serves cached answers to similar questions within a scope; see the module docstring.

    ``cache`` is a ``SemanticCache`` (``InMemorySemanticCache`` in the core,
    ``PgVectorSemanticCache`` on the Django ORM); ``owner_key`` names the context key holding
    the owner; ``allow_shared=True`` caches requests without an owner in one shared scope;
    ``namespace`` is mixed into every scope. Raises ``ValueError("Cache must not be null")``.
    """

    DEFAULT_ORDER: ClassVar[int] = DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER + 50
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.CACHE})
    AFTER_SIDE_EFFECTS: ClassVar[bool] = True

    def __init__(
        self,
        cache: SemanticCache,
        *,
        owner_key: str = OWNER,
        allow_shared: bool = False,
        namespace: str = "",
        cache_tool_turns: bool = False,
        fail_open: bool = True,
        order: int = DEFAULT_ORDER,
    ) -> None:
        if cache is None:
            raise ValueError("Cache must not be null")
        self.cache = cache
        self.owner_key = owner_key
        self.allow_shared = allow_shared
        self.namespace = namespace
        self.cache_tool_turns = cache_tool_turns
        self.fail_open = fail_open
        self._order = order

    def _lookup_key(self, request: ChatClientRequest) -> tuple[str, str] | None:
        """``(query, scope)``, or ``None`` when this request must bypass the cache."""
        owner = request.context.get(self.owner_key)
        if owner is None and not self.allow_shared:
            return None
        _, user = _last_user(request)
        if user is None or not user.text.strip() or user.media:
            return None
        return user.text, cache_scope(request, "" if owner is None else str(owner), self.namespace)

    def cacheable(self, response: ChatResponse | None) -> bool:
        """Whether ``response`` may be stored (see the module docstring)."""
        if response is None or not response.generations or response.metadata.get(CACHE_HIT):
            return False
        for generation in response.generations:
            if generation.output.tool_calls or not generation.output.text.strip():
                return False
            if (generation.finish_reason or "").lower() in UNCACHEABLE_FINISH_REASONS:
                return False
        rounds = response.metadata.get(ROUND_USAGES)
        return self.cache_tool_turns or rounds is None or len(rounds) <= 1

    async def _get(self, query: str, scope: str) -> CacheHit | None:
        try:
            return await self.cache.get(query, scope)
        except Exception:
            if not self.fail_open:
                raise
            logger.warning("semantic cache lookup failed; treating it as a miss", exc_info=True)
            return None

    async def _set(self, query: str, response: ChatResponse, scope: str) -> None:
        try:
            await self.cache.set(query, response, scope)
        except Exception:
            if not self.fail_open:
                raise
            logger.warning("semantic cache write failed; the answer is not cached", exc_info=True)

    @staticmethod
    def _hit_response(hit: CacheHit, context: Mapping[str, Any]) -> ChatClientResponse:
        response = hit.response.with_metadata(
            **{CACHE_HIT: True, CACHE_SIMILARITY: hit.similarity, CACHE_QUERY: hit.query}
        )
        return ChatClientResponse(response, context)

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        key = self._lookup_key(request)
        if key is None:
            return await chain.next_call(request)
        hit = await self._get(*key)
        if hit is not None:
            return self._hit_response(hit, request.context)
        response = await chain.next_call(request)
        answer = response.chat_response
        if answer is not None and self.cacheable(answer):
            await self._set(key[0], answer, key[1])
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        key = self._lookup_key(request)
        if key is None:
            async with closing_stream(chain.next_stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        hit = await self._get(*key)
        if hit is not None:
            yield self._hit_response(hit, request.context)
            return
        accumulator = ChatClientResponseAccumulator()
        async with closing_stream(chain.next_stream(request)) as chunks:
            async for chunk in chunks:
                accumulator.add(chunk)
                yield chunk
        aggregated = accumulator.result().chat_response
        if aggregated is not None and self.cacheable(aggregated):
            await self._set(key[0], aggregated, key[1])
