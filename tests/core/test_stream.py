"""Streams through the chain: after-once on the aggregate, per-chunk context, cancellation."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

from advisors_app.core import (
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatGenerationMetadata,
    ChatModelCallAdvisor,
    ChatModelStreamAdvisor,
    ChatResponse,
    DefaultAroundAdvisorChain,
    Generation,
    Prompt,
    ScriptedChatModel,
    StreamAdvisor,
)
from advisors_app.core.streams import closing_stream


class AfterCounter(BaseAdvisor):
    """Records what ``after`` saw (test-local state; real advisors keep none)."""

    def __init__(self, seen: list):
        self.seen = seen

    def after(self, response, chain):
        self.seen.append(response.chat_response.text)
        return response.mutate(
            chat_response=response.chat_response.with_metadata(checked=True),
            context={"after_ran": True},
        )


def stream_chain(model, *advisors):
    return DefaultAroundAdvisorChain(
        [*advisors, ChatModelCallAdvisor(model), ChatModelStreamAdvisor(model)]
    )


async def test_after_runs_once_on_the_aggregate_without_finish_reason():
    seen: list[str] = []
    model = ScriptedChatModel([["Red", ", green", ", blue"]])  # str chunks: no finish reason
    chain = stream_chain(model, AfterCounter(seen))
    chunks = [c async for c in chain.next_stream(ChatClientRequest(Prompt("colours?")))]
    assert seen == ["Red, green, blue"]
    texts = [
        c.chat_response.text for c in chunks if c.chat_response and c.chat_response.generations
    ]
    assert texts == ["Red", ", green", ", blue"]  # after's result is not re-emitted as text
    trailer = chunks[-1]
    assert trailer.chat_response.generations == ()
    assert trailer.chat_response.metadata["checked"] is True
    assert trailer.context["after_ran"] is True


async def test_each_chunk_keeps_its_own_context():
    class StampEachChunk(StreamAdvisor):
        async def advise_stream(self, request, chain):
            async with closing_stream(chain.next_stream(request)) as chunks:
                i = 0
                async for chunk in chunks:
                    i += 1
                    yield chunk.mutate(context={f"chunk{i}": True})

    model = ScriptedChatModel([["a", "b", "c"]])
    chain = stream_chain(model, StampEachChunk())
    chunks = [c async for c in chain.next_stream(ChatClientRequest(Prompt("x")))]
    assert [sorted(k for k in c.context if k.startswith("chunk")) for c in chunks] == [
        ["chunk1"],
        ["chunk2"],
        ["chunk3"],
    ]


async def test_consumer_closing_early_cancels_the_model_stream():
    model = ScriptedChatModel([["1", "2", "3", "4", "5"]], chunk_delay=0.01)
    chain = stream_chain(model, AfterCounter([]), BaseAdvisor())
    async with aclosing(chain.next_stream(ChatClientRequest(Prompt("x")))) as stream:
        async for chunk in stream:
            if chunk.chat_response.text == "2":
                break
    assert model.events == ["stream", "cancel"]


async def test_task_cancellation_reaches_the_model_stream():
    model = ScriptedChatModel([["1"] * 100], chunk_delay=0.01)
    client = ChatClient(model, default_advisors=[BaseAdvisor()])

    async def consume():
        async for _ in client.prompt("x").stream().content():
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert model.events == ["stream", "cancel"]


async def test_normal_completion_is_not_reported_as_cancel():
    model = ScriptedChatModel([["a", "b"]])
    client = ChatClient(model, default_advisors=[AfterCounter([]), BaseAdvisor()])
    assert [t async for t in client.prompt("x").stream().content()] == ["a", "b"]
    assert model.events == ["stream", "complete"]


async def test_finish_reason_chunk_and_usage_only_chunk_are_aggregated():
    from advisors_app.core import ChatResponseMetadata, Usage

    final = ChatResponse(
        (Generation(AssistantMessage(""), ChatGenerationMetadata("STOP")),),
    )
    usage_only = ChatResponse((), ChatResponseMetadata(usage=Usage(12, 3)))
    model = ScriptedChatModel([["Hel", "lo", final, usage_only]])
    aggregate = await ChatClient(model).prompt("x").stream().aggregate()
    assert aggregate.chat_response.text == "Hello"
    assert aggregate.chat_response.result.finish_reason == "STOP"
    assert aggregate.chat_response.metadata.usage == Usage(12, 3, 15)
