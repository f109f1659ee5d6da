"""``ToolSearchToolCallingAdvisor``: tools found on demand (Spring AI
``ToolSearchToolCallingAdvisor``).

Seed §6.9, reference §3.16. Instead of every tool's schema, the model gets one tool,
``toolSearchTool``, that searches a per-session :class:`~advisors_app.core.tools.search.ToolIndex`;
the tools it finds are offered from the next round on. The session is the conversation (context
key ``chat_memory_conversation_id`` by default). A session's tools are (re)indexed only when the
tool set changes (SHA-256 fingerprint of names and descriptions); an eviction strategy (default
LRU of 1000 sessions) drops stale sessions.

Divergences, each a fix: tools are offered in a deterministic order, ``toolSearchTool`` first
and then the found tools in the order the request lists them (Spring uses a ``HashSet``, defect
5.5.34); the per-turn callback map travels in a copy of the request context and is removed from
the response context (Spring mutates the caller's context, defect 5.1.8); the
``maxResults`` description states the real default (defect 5.5.35); a tool found earlier in the
turn stays offered when the next round's messages no longer show the search that found it
(internal history disabled, with a memory advisor inside the loop: the round after the found
tool ran), where Spring AI drops it and a model retrying after an input error must search again
(Spring AI #7034); without accumulation, a new search still replaces the found tools. Like
Spring AI, indexes and fingerprints live in process memory (defect 5.5.37): each worker
process indexes on its own.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Annotated, Any, ClassVar

from pydantic import Field

from ..attributes import CONVERSATION_ID
from ..mappings import ReadOnlyMap
from ..messages import Message, ToolResponseMessage
from ..prompt import ToolCallingChatOptions
from ..requests import ChatClientRequest, ChatClientResponse
from ..streams import closing_stream
from ..tools.callback import FunctionToolCallback, ToolCallback, ToolContext
from ..tools.manager import ToolCallingManager
from ..tools.search import (
    DEFAULT_MAX_RESULTS,
    LruEvictionStrategy,
    ToolIndex,
    ToolIndexEvictionStrategy,
    ToolReference,
    ToolSearchRequest,
    tool_fingerprint,
)
from .tool_calling import ToolCallingAdvisor, ToolExecutionEligibilityChecker

__all__ = [
    "DEFAULT_SYSTEM_MESSAGE_SUFFIX",
    "TOOL_SEARCH_TOOL_NAME",
    "TOOL_SEARCH_TOOL_SESSION_ID_KEY",
    "ToolSearchToolCallingAdvisor",
]

#: Spring AI's ``DEFAULT_SYSTEM_PROMPT_SUFFIX.md``, verbatim (a leading and a trailing newline).
DEFAULT_SYSTEM_MESSAGE_SUFFIX = (
    "\nYou have access to a special tool called `toolSearchTool` that allows you to discover "
    "relevant tools on-demand. When you need to perform an action but don't see an appropriate "
    "tool in your current context, use `toolSearchTool` to search for it.\n"
)
TOOL_SEARCH_TOOL_NAME = "toolSearchTool"
#: Tool-context key holding the session whose index ``toolSearchTool`` searches.
TOOL_SEARCH_TOOL_SESSION_ID_KEY = "toolSearchToolSessionId"
# Internal context key: this turn's tools by name, in request order. Removed from responses.
_CACHED_TOOL_CALLBACKS = "tool_search.cached_tool_callbacks"

_SEARCH_DESCRIPTION = (
    "Search the tools available to you by what they do. Returns the names of the matching "
    "tools, best first; those tools can be called from your next step on."
)


# Annotations are evaluated in the module namespace (postponed evaluation), hence constants.
_QUERY_DESCRIPTION = "What you need a tool for, in a few keywords or a sentence."
_MAX_RESULTS_DESCRIPTION = (
    f"Maximum number of tool names to return (default {DEFAULT_MAX_RESULTS}, "
    "unless the application set another)."
)
_CATEGORY_DESCRIPTION = "Optional tool category to restrict the search to."


def _search_tool(index: ToolIndex, advisor_max_results: int | None) -> ToolCallback:
    # Parameter names are Spring AI's: they are what the model sees.
    async def tool_search_tool(
        query: Annotated[str, Field(description=_QUERY_DESCRIPTION)],
        maxResults: Annotated[int | None, Field(ge=1, description=_MAX_RESULTS_DESCRIPTION)] = None,
        categoryFilter: Annotated[str | None, Field(description=_CATEGORY_DESCRIPTION)] = None,
        context: ToolContext | None = None,
    ) -> list[str]:
        session_id = context.get(TOOL_SEARCH_TOOL_SESSION_ID_KEY) if context else None
        if not session_id:
            return []
        response = await index.search(
            ToolSearchRequest(
                str(session_id), query, maxResults or advisor_max_results, categoryFilter
            )
        )
        return response.names

    return FunctionToolCallback(
        tool_search_tool, name=TOOL_SEARCH_TOOL_NAME, description=_SEARCH_DESCRIPTION
    )


def _names_in(response_data: str) -> list[str]:
    try:
        names = json.loads(response_data)
    except ValueError:
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


class ToolSearchToolCallingAdvisor(ToolCallingAdvisor):
    """The tool loop with on-demand tool discovery; the one ``ToolAdvisor`` of its chain.

    ``tool_index`` (required, ``ValueError("toolIndex is required")``) is a ``RegexToolIndex``,
    ``KeywordToolIndex`` (BM25) or ``VectorToolIndex``; ``system_message_suffix`` is appended
    to the system message, which is created when missing (default: Spring AI's text);
    ``reference_tool_name_accumulation=True`` keeps every tool found earlier in the turn,
    ``False`` only those of the latest search; ``max_results`` caps results when the model asks
    for no number (``None``: the index default, 10); ``session_id_key_name`` is the context key
    of the session (a missing value raises ``ValueError``); ``eviction_strategy`` defaults to
    ``LruEvictionStrategy(1000)``. The other arguments are ``ToolCallingAdvisor``'s.
    """

    DEFAULT_ORDER: ClassVar[int] = ToolCallingAdvisor.DEFAULT_ORDER

    def __init__(
        self,
        tool_index: ToolIndex,
        *,
        system_message_suffix: str = DEFAULT_SYSTEM_MESSAGE_SUFFIX,
        reference_tool_name_accumulation: bool = True,
        max_results: int | None = None,
        session_id_key_name: str = CONVERSATION_ID,
        eviction_strategy: ToolIndexEvictionStrategy | None = None,
        tool_calling_manager: ToolCallingManager | None = None,
        tool_execution_eligibility_checker: ToolExecutionEligibilityChecker | None = None,
        conversation_history_enabled: bool = True,
        order: int = DEFAULT_ORDER,
        round_streaming: str = "first_content",
    ) -> None:
        super().__init__(
            tool_calling_manager,
            tool_execution_eligibility_checker,
            conversation_history_enabled,
            order,
            round_streaming=round_streaming,
        )
        if tool_index is None:
            raise ValueError("toolIndex is required")
        if not system_message_suffix or not system_message_suffix.strip():
            raise ValueError("systemMessageSuffix cannot be null or empty")
        if max_results is not None and max_results < 1:
            raise ValueError(f"max_results must be positive, got {max_results}")
        self.tool_index = tool_index
        self.system_message_suffix = system_message_suffix
        self.reference_tool_name_accumulation = reference_tool_name_accumulation
        self.max_results = max_results
        self.session_id_key_name = session_id_key_name
        self.eviction_strategy = eviction_strategy or LruEvictionStrategy(1000)
        self.tool_search_tool = _search_tool(tool_index, max_results)
        self._fingerprints: dict[str, str] = {}
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return "ToolSearchToolCallingAdvisor"

    def _session_id(self, context: Mapping[str, Any]) -> str:
        value = context.get(self.session_id_key_name)
        if value is None:
            raise ValueError(
                f"context must contain a non-null value for '{self.session_id_key_name}'"
            )
        return str(value)

    async def evict_session(self, session_id: str) -> None:
        """Drop a session's index and fingerprint (it is re-indexed on its next turn)."""
        await self.tool_index.clear_index(session_id)
        with self._lock:
            self._fingerprints.pop(session_id, None)
        self.eviction_strategy.on_removed(session_id)

    async def do_initialize_loop(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        session_id = self._session_id(request.context)
        for evicted in self.eviction_strategy.on_access(session_id):
            await self.evict_session(evicted)
        callbacks = self.tool_calling_manager.resolve_tool_callbacks(request.prompt.options)
        references = [ToolReference(cb.name, cb.definition.description) for cb in callbacks]
        fingerprint = tool_fingerprint(references)
        if self._fingerprints.get(session_id) != fingerprint:
            await self.tool_index.clear_index(session_id)
            await self.tool_index.index_tools(session_id, references)
            with self._lock:
                self._fingerprints[session_id] = fingerprint
        suffix = self.system_message_suffix
        prompt = request.prompt.augment_system_message(lambda m: m.text + suffix)
        # The loop carries each round's options into the next: they hold the tools offered so
        # far, found by searches the next round's messages may no longer show (#7034).
        options = request.prompt.options
        assert isinstance(options, ToolCallingChatOptions)
        options = options.mutate(tool_callbacks=(self.tool_search_tool,), tool_names=())
        return request.mutate(
            prompt=prompt.mutate(options=options),
            context={
                _CACHED_TOOL_CALLBACKS: {cb.name: cb for cb in callbacks},
                TOOL_SEARCH_TOOL_SESSION_ID_KEY: session_id,
            },
        )

    def _referenced_names(self, messages: Iterable[Message]) -> set[str] | None:
        """Names the searches in ``messages`` found (``None``: the messages show no search)."""
        rounds = [
            [r for r in m.responses if r.name.lower() == TOOL_SEARCH_TOOL_NAME.lower()]
            for m in messages
            if isinstance(m, ToolResponseMessage)
        ]
        rounds = [responses for responses in rounds if responses]
        if not rounds:
            return None
        if not self.reference_tool_name_accumulation:
            rounds = rounds[-1:]
        return {
            name for responses in rounds for r in responses for name in _names_in(r.response_data)
        }

    async def do_before_call(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        options = request.prompt.options
        assert isinstance(options, ToolCallingChatOptions)
        cached: dict[str, ToolCallback] = request.context[_CACHED_TOOL_CALLBACKS]
        offered = {cb.name for cb in options.tool_callbacks if cb is not self.tool_search_tool}
        searched = self._referenced_names(request.prompt.instructions)
        if searched is None:
            found = offered
        elif self.reference_tool_name_accumulation:
            found = offered | searched
        else:
            found = searched
        selected = (self.tool_search_tool, *(cb for name, cb in cached.items() if name in found))
        session_id = request.context[TOOL_SEARCH_TOOL_SESSION_ID_KEY]
        options = options.mutate(
            tool_callbacks=selected,
            tool_names=(),
            tool_context={**options.tool_context, TOOL_SEARCH_TOOL_SESSION_ID_KEY: session_id},
        )
        return request.mutate(prompt=request.prompt.mutate(options=options))

    async def do_finalize_loop(
        self, response: ChatClientResponse, chain: Any
    ) -> ChatClientResponse:
        return _without_cache_key(response)

    def do_finalize_loop_stream(
        self, stream: AsyncIterator[ChatClientResponse], chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        return _stream_without_cache_key(stream)


def _without_cache_key(response: ChatClientResponse) -> ChatClientResponse:
    if _CACHED_TOOL_CALLBACKS not in response.context:
        return response
    context = ReadOnlyMap(
        {k: v for k, v in response.context.items() if k != _CACHED_TOOL_CALLBACKS}
    )
    return ChatClientResponse(response.chat_response, context)


async def _stream_without_cache_key(
    stream: AsyncIterator[ChatClientResponse],
) -> AsyncIterator[ChatClientResponse]:
    async with closing_stream(stream) as chunks:
        async for chunk in chunks:
            yield _without_cache_key(chunk)
