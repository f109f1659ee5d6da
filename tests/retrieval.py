"""Helpers for retrieval tests: a counting store wrapper, a tiny tool loop, chain runners."""

from __future__ import annotations

from typing import Any

from advisors_app.core import (
    DEFAULT_TOOL_CALLING_ORDER,
    AssistantMessage,
    CallAdvisor,
    ChatClientRequest,
    ChatModelCallAdvisor,
    ChatModelStreamAdvisor,
    ChatResponse,
    DefaultAroundAdvisorChain,
    Generation,
    Prompt,
    StreamAdvisor,
    ToolAdvisor,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
)
from advisors_app.core.streams import closing_stream
from advisors_app.core.vectorstore import VectorStore


class CountingStore(VectorStore):
    """Wraps a store and records every search request and every batch added."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner
        self.searches: list[Any] = []
        self.adds: list[list[Any]] = []

    async def aadd(self, documents):
        self.adds.append(list(documents))
        await self.inner.aadd(documents)

    async def adelete(self, ids_or_filter):
        await self.inner.adelete(ids_or_filter)

    async def asimilarity_search(self, request):
        self.searches.append(request)
        return await self.inner.asimilarity_search(request)


def tool_call_response() -> ChatResponse:
    call = ToolCall("call-1", "lookup", "{}")
    return ChatResponse((Generation(AssistantMessage("", tool_calls=(call,))),))


class LoopingAdvisor(CallAdvisor, StreamAdvisor, ToolAdvisor):
    """A two-round tool loop as Spring's ToolCallingAdvisor runs it: ``chain.copy(self)`` twice.

    Round 2 sends the original instructions plus the assistant's tool call and a tool result,
    with the original context, as Spring does.
    """

    order = DEFAULT_TOOL_CALLING_ORDER

    def _second_round(self, request: ChatClientRequest, first: ChatResponse) -> ChatClientRequest:
        history = (
            *request.prompt.instructions,
            first.result.output,
            ToolResponseMessage((ToolResponse("call-1", "lookup", "42"),)),
        )
        return ChatClientRequest(Prompt(history, request.prompt.options), request.context)

    async def advise_call(self, request, chain):
        first = await chain.copy(self).next_call(request)
        if not first.chat_response.has_tool_calls():
            return first
        return await chain.copy(self).next_call(self._second_round(request, first.chat_response))

    async def advise_stream(self, request, chain):
        chunks = []
        async with closing_stream(chain.copy(self).next_stream(request)) as stream:
            async for chunk in stream:
                chunks.append(chunk)
        first = next(c.chat_response for c in chunks if c.chat_response is not None)
        if not first.has_tool_calls():
            for chunk in chunks:
                yield chunk
            return
        second = self._second_round(request, first)
        async with closing_stream(chain.copy(self).next_stream(second)) as stream:
            async for chunk in stream:
                yield chunk


def chain_of(model, *advisors) -> DefaultAroundAdvisorChain:
    return DefaultAroundAdvisorChain(
        [*advisors, ChatModelCallAdvisor(model), ChatModelStreamAdvisor(model)]
    )


async def drain(stream) -> list[Any]:
    return [chunk async for chunk in stream]
