"""Stream aggregation: text, thoughts, tool-call deltas, usage, metadata; UsageAccumulator."""

from __future__ import annotations

from advisors_app.core import (
    AssistantMessage,
    ChatClientMessageAggregator,
    ChatClientResponse,
    ChatGenerationMetadata,
    ChatResponse,
    ChatResponseAccumulator,
    ChatResponseMetadata,
    Generation,
    MessageAggregator,
    ToolCall,
    Usage,
    UsageAccumulator,
)
from advisors_app.core.aggregation import combine_stream_usage


def chunk(text="", *, calls=(), usage=None, finish=None, metadata=None, extra=None, **kw):
    return ChatResponse(
        (Generation(AssistantMessage(text, metadata, calls), ChatGenerationMetadata(finish)),),
        ChatResponseMetadata(usage=usage, extra=extra, **kw),
    )


async def agen(items):
    for item in items:
        yield item


def aggregate(chunks):
    accumulator = ChatResponseAccumulator()
    for c in chunks:
        accumulator.add(c)
    return accumulator.result()


def test_text_thoughts_metadata_and_ids():
    result = aggregate(
        [
            chunk("thinking...", metadata={"is_thought": True}, id="r1"),
            chunk("Hel", metadata={"a": 1}, model="m1"),
            chunk("lo", metadata={"b": 2}, finish="STOP", extra={"k": "v"}),
        ]
    )
    message = result.result.output
    assert message.text == "thinking...Hello"
    assert message.metadata["thoughts"] == "thinking..."
    assert message.metadata["output_without_thoughts"] == "Hello"
    assert message.metadata["a"] == 1 and message.metadata["b"] == 2
    assert result.result.finish_reason == "STOP"
    assert (result.metadata.id, result.metadata.model, result.metadata["k"]) == ("r1", "m1", "v")


def test_tool_call_deltas_are_merged_by_id_and_index_never_dropped():
    result = aggregate(
        [
            chunk(calls=[ToolCall("call_1", "get_weather", '{"ci', index=0)]),
            chunk(calls=[ToolCall("", "", 'ty": "Os', index=0)]),
            chunk(calls=[ToolCall("call_2", "get_time", "", index=1)]),
            chunk(calls=[ToolCall("", "", 'lo"}', index=0), ToolCall("", "", "{}", index=1)]),
            chunk(finish="TOOL_CALLS"),
        ]
    )
    calls = result.result.output.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_1", "get_weather", '{"city": "Oslo"}'),
        ("call_2", "get_time", "{}"),
    ]
    assert result.has_tool_calls()


def test_complete_tool_calls_from_separate_chunks_stay_separate():
    result = aggregate(
        [chunk(calls=[ToolCall("a", "f", "{}")]), chunk(calls=[ToolCall("b", "f", '{"x": 1}')])]
    )
    assert [c.id for c in result.result.output.tool_calls] == ["a", "b"]


def test_every_generation_index_is_aggregated():
    two = ChatResponse((Generation(AssistantMessage("a")), Generation(AssistantMessage("x"))))
    more = ChatResponse((Generation(AssistantMessage("b")), Generation(AssistantMessage("y"))))
    result = aggregate([two, more])
    assert [g.output.text for g in result.generations] == ["ab", "xy"]


def test_usage_cumulative_on_last_chunk_keeps_cached_tokens_b11_p1():
    usage = combine_stream_usage([Usage(0, 0, 0), None, Usage(12, 2, 14, cached_prompt_tokens=8)])
    assert usage == Usage(12, 2, 14, cached_prompt_tokens=8)


def test_usage_incremental_per_chunk_is_summed_b11_p2():
    usage = combine_stream_usage([Usage(12, 1), Usage(0, 1), Usage(0, 1), Usage(0, 1)])
    assert usage == Usage(12, 4, 16)


def test_usage_cumulative_growing_counts_take_the_last():
    assert combine_stream_usage([Usage(12, 1), Usage(12, 2), Usage(12, 3)]) == Usage(12, 3)


def test_usage_unknown_is_none_and_empty_never_resets():
    assert combine_stream_usage([None, Usage(0, 0, 0)]) is None
    assert combine_stream_usage([Usage(5, 5), Usage(0, 0, 0)]) == Usage(5, 5)
    assert aggregate([chunk("x")]).metadata.usage is None


async def test_message_aggregator_passes_chunks_and_reports_once():
    seen = []
    chunks = [chunk("a"), chunk("b")]
    out = [c async for c in MessageAggregator().aggregate(agen(chunks), seen.append)]
    assert out == chunks
    assert [r.text for r in seen] == ["ab"]


async def test_client_aggregator_keeps_chunk_contexts_and_context_only_chunks():
    seen = []

    async def on_complete(response):
        seen.append(response)

    items = [
        ChatClientResponse(chunk("a"), {"n": 1}),
        ChatClientResponse(None, {"only_context": True}),
        ChatClientResponse(chunk("b"), {"n": 2}),
    ]
    out = [c async for c in ChatClientMessageAggregator().aggregate(agen(items), on_complete)]
    assert out == items  # unchanged, none dropped, no context rewritten
    assert out[0].context == {"n": 1}
    assert seen[0].chat_response.text == "ab"
    assert seen[0].context == {"n": 2, "only_context": True}


async def test_aggregator_does_not_report_on_error():
    seen = []

    async def failing():
        yield chunk("a")
        raise RuntimeError("cut")

    got = []
    try:
        async for c in MessageAggregator().aggregate(failing(), seen.append):
            got.append(c)
    except RuntimeError:
        pass
    assert len(got) == 1 and seen == []


def test_usage_accumulator_sums_rounds_and_keeps_each_round_b12():
    accumulator = UsageAccumulator()
    accumulator.add_round_response(ChatClientResponse(chunk("call", usage=Usage(100, 20))))
    accumulator.add_round_response(None)
    accumulator.add_round_response(ChatClientResponse(chunk("final", usage=Usage(150, 30))))
    assert accumulator.accumulated_usage == Usage(250, 50, 300)
    assert accumulator.round_usages == (Usage(100, 20), Usage(150, 30))
    final = accumulator.accumulated_response
    assert final.chat_response.text == "final"
    assert final.chat_response.metadata.usage == Usage(250, 50, 300)
    trailer = accumulator.usage_chunk(final)
    assert trailer.chat_response.generations == ()
    assert trailer.chat_response.metadata.usage == Usage(250, 50, 300)


def test_usage_accumulator_with_nothing_reported_changes_nothing():
    accumulator = UsageAccumulator()
    response = ChatClientResponse(chunk("x"))
    accumulator.add_round_response(response)
    assert accumulator.accumulated_usage is None
    assert accumulator.apply_accumulated_usage(response) is response
    assert accumulator.usage_chunk(response) is None


def test_usage_with_prompt_tokens_but_zero_total_is_not_empty():
    assert not Usage(10, 0, 0).is_empty
    assert Usage().is_empty


def test_usage_each_count_is_resolved_on_its_own():
    # Anthropic-style: the prompt on the first chunk, a growing output count.
    assert combine_stream_usage([Usage(12, 1), Usage(0, 5)]) == Usage(12, 5, 17)
    # The prompt repeated on every chunk of a cumulative stream counts once.
    assert combine_stream_usage([Usage(5, 1), Usage(5, 3)]) == Usage(5, 3, 8)
    # Totals that are not prompt + completion (reasoning tokens, say) follow the same rule.
    assert combine_stream_usage([Usage(10, 1, 20), Usage(10, 2, 30)]) == Usage(10, 2, 30)
