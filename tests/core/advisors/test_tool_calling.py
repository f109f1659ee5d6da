"""ToolCallingAdvisor: rounds, parallel calls, return-direct, limits, history, usage, streams."""

from __future__ import annotations

import asyncio
import threading

import pytest

from advisors_app.core import (
    AssistantMessage,
    ChatClient,
    ChatClientResponseAccumulator,
    ChatResponse,
    ChatResponseMetadata,
    RecordingAdvisor,
    ScriptedChatModel,
    SystemMessage,
    ToolCallingChatOptions,
    ToolResponse,
    ToolResponseMessage,
    Usage,
    UserMessage,
)
from advisors_app.core.advisors import ToolCallingAdvisor
from advisors_app.core.advisors.tool_calling import ROUND_USAGES
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import (
    ToolCallingManager,
    ToolCallLimitBehavior,
    ToolCallLimitExceededError,
    ToolExecutionResult,
    ToolRegistry,
    tool,
)

MODES = ["call", "stream"]


@tool
def weather(city: str) -> dict:
    """Current weather for a city."""
    return {"city": city, "sky": "sunny"}


@tool(return_direct=True)
def book(room: str) -> str:
    """Book a meeting room."""
    return f"booked {room}"


@tool(return_direct=True)
def cancel(room: str) -> str:
    """Cancel a booking."""
    return f"cancelled {room}"


async def run(client_or_spec, mode):
    """The final ChatResponse of a call, or of a stream's aggregate (with its chunks)."""
    spec = client_or_spec
    if mode == "call":
        return await (await spec.acall()).achat_response(), None
    chunks = [c async for c in spec.stream().chat_client_responses()]
    accumulator = ChatClientResponseAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.result().chat_response, chunks


def client_for(model, *advisors, **kwargs):
    return ChatClient(model, default_advisors=advisors, **kwargs)


@pytest.mark.parametrize("mode", MODES)
async def test_single_round_runs_the_tool_and_sends_the_result_back(mode):
    model = ScriptedChatModel(
        [tool_call_response(("weather", {"city": "Paris"})), "Sunny in Paris"]
    )
    spec = client_for(model).prompt("weather in Paris?").tools(weather)
    response, _ = await run(spec, mode)
    assert response.text == "Sunny in Paris"
    second = model.prompts[1].instructions
    assert isinstance(second[0], UserMessage)
    assert second[1].tool_calls[0].name == "weather"
    assert second[2] == ToolResponseMessage(
        [ToolResponse("call_1", "weather", '{"city":"Paris","sky":"sunny"}')]
    )
    assert len(model.prompts) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_multi_round_loop_and_inner_advisors_run_once_per_round(mode):
    log: list[str] = []
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "Paris"})),
            tool_call_response(("weather", {"city": "Rome"})),
            "Both sunny",
        ]
    )
    client = client_for(model, RecordingAdvisor("inner", 0, log))
    response, _ = await run(client.prompt("compare").tools(weather), mode)
    assert response.text == "Both sunny"
    assert log == ["inner:before", "inner:after"] * 3
    last = model.prompts[2].instructions
    assert [m.message_type.value for m in last] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_calls_of_a_round_run_concurrently_and_answer_in_call_order(mode):
    started: list[str] = []
    both_started = asyncio.Event()

    @tool
    async def slow(name: str, delay: float) -> str:
        """Wait, then answer."""
        started.append(name)
        if len(started) == 2:
            both_started.set()
        # Sequential execution would never see the second call start: fail instead of hanging.
        await asyncio.wait_for(both_started.wait(), 5)
        await asyncio.sleep(delay)
        return name

    model = ScriptedChatModel(
        [
            tool_call_response(
                ("slow", {"name": "first", "delay": 0.05}), ("slow", {"name": "second", "delay": 0})
            ),
            "done",
        ]
    )
    response, _ = await run(client_for(model).prompt("go").tools(slow), mode)
    assert response.text == "done"
    responses = model.prompts[1].instructions[-1].responses
    assert [r.response_data for r in responses] == ["first", "second"]
    assert [r.id for r in responses] == ["call_1", "call_2"]


async def test_sync_tools_run_in_a_worker_thread():
    threads: list[int] = []

    @tool
    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "ok"

    model = ScriptedChatModel([tool_call_response(("where", {})), "fine"])
    await client_for(model).prompt("x").tools(where).acall()
    assert threads and threads[0] != threading.get_ident()


@pytest.mark.parametrize("mode", MODES)
async def test_return_direct_when_every_invoked_tool_is_return_direct(mode):
    usage = Usage(100, 20)
    model = ScriptedChatModel(
        [tool_call_response(("book", {"room": "A"}), ("cancel", {"room": "B"}), usage=usage)]
    )
    response, chunks = await run(client_for(model).prompt("book").tools(book, cancel), mode)
    assert [g.text for g in response.generations] == ["booked A", "cancelled B"]
    assert {g.finish_reason for g in response.generations} == {ToolExecutionResult.FINISH_REASON}
    first = response.generations[0].output.metadata
    assert first[ToolExecutionResult.METADATA_TOOL_ID] == "call_1"
    assert first[ToolExecutionResult.METADATA_TOOL_NAME] == "book"
    assert response.metadata.usage == usage
    assert len(model.prompts) == 1
    if chunks is not None:
        assert len(chunks) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_some_return_direct_tools_keep_the_loop_going(mode):
    model = ScriptedChatModel(
        [tool_call_response(("book", {"room": "A"}), ("weather", {"city": "X"})), "all set"]
    )
    response, _ = await run(client_for(model).prompt("x").tools(book, weather), mode)
    assert response.text == "all set"
    assert len(model.prompts) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_failing_return_direct_tool_goes_back_to_the_model(mode):
    @tool(return_direct=True)
    def explode() -> str:
        """Always fails."""
        raise RuntimeError("disk full")

    model = ScriptedChatModel([tool_call_response(("explode", {})), "sorry"])
    response, _ = await run(client_for(model).prompt("x").tools(explode), mode)
    assert response.text == "sorry"
    sent = model.prompts[1].instructions[-1].responses[0].response_data
    assert sent == "Error executing tool 'explode': disk full"


@pytest.mark.parametrize("mode", MODES)
async def test_tool_errors_become_tool_responses(mode):
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"town": "X"}), ("nowhere", {}), ("weather", "{oops")),
            "recovered",
        ]
    )
    response, _ = await run(client_for(model).prompt("x").tools(weather), mode)
    assert response.text == "recovered"
    sent = [r.response_data for r in model.prompts[1].instructions[-1].responses]
    assert sent[0] == (
        "invalid arguments for tool 'weather': city: Field required; "
        "town: Extra inputs are not permitted"
    )
    assert sent[1] == "No ToolCallback found for tool name: nowhere"
    assert sent[2].startswith("invalid arguments for tool 'weather': (arguments): Invalid JSON")


def limited(**kwargs):
    return ToolCallingAdvisor(tool_calling_manager=ToolCallingManager(**kwargs))


@pytest.mark.parametrize("mode", MODES)
async def test_per_tool_limit_throw_returns_the_breach_as_a_generation(mode):
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "A"})),
            tool_call_response(("weather", {"city": "B"}), ("weather", {"city": "C"})),
        ]
    )
    client = client_for(model, limited(max_calls_per_tool=2))
    response, _ = await run(client.prompt("x").tools(weather), mode)
    (generation,) = response.generations
    assert generation.finish_reason == ToolCallLimitExceededError.FINISH_REASON
    assert generation.text == (
        "Tool call limit (2) exceeded for tool 'weather'. "
        "No further calls to this tool are allowed in this turn."
    )
    partial = generation.metadata[ToolCallLimitExceededError.METADATA_PARTIAL_TOOL_RESPONSES]
    assert [r.response_data for r in partial] == ['{"city":"B","sky":"sunny"}']
    assert len(model.prompts) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_total_limit_counts_every_tool(mode):
    model = ScriptedChatModel(
        [
            tool_call_response(
                ("weather", {"city": "A"}), ("book", {"room": "1"}), ("weather", {"city": "C"})
            )
        ]
    )
    client = client_for(model, limited(max_total_tool_calls=2))
    response, _ = await run(client.prompt("x").tools(weather, book), mode)
    assert response.result.text == (
        "Total tool call limit (2) exceeded for this turn. No further tool calls are allowed."
    )


@pytest.mark.parametrize("mode", MODES)
async def test_return_error_response_skips_the_call_then_ends_if_the_model_insists(mode):
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "A"}), ("weather", {"city": "B"})),
            "answer with what I have",
        ]
    )
    manager = dict(max_calls_per_tool=1, limit_behavior=ToolCallLimitBehavior.RETURN_ERROR_RESPONSE)
    client = client_for(model, limited(**manager))
    response, _ = await run(client.prompt("x").tools(weather), mode)
    assert response.text == "answer with what I have"
    sent = [r.response_data for r in model.prompts[1].instructions[-1].responses]
    assert sent[1].startswith("Tool call limit (1) exceeded for tool 'weather'.")

    insisting = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "A"}), ("weather", {"city": "B"})),
            tool_call_response(("weather", {"city": "C"})),
        ]
    )
    client = client_for(insisting, limited(**manager))
    response, _ = await run(client.prompt("x").tools(weather), mode)
    assert response.result.finish_reason == "toolCallLimitExceeded"
    assert len(insisting.prompts) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_excluded_tool_ignores_the_per_tool_limit_but_counts_in_the_total(mode):
    model = ScriptedChatModel(
        [tool_call_response(*[("weather", {"city": c}) for c in "ABC"]), "ok"]
    )
    client = client_for(model, limited(max_calls_per_tool=1, excluded_from_limit=["weather"]))
    response, _ = await run(client.prompt("x").tools(weather), mode)
    assert response.text == "ok"


@pytest.mark.parametrize("mode", MODES)
async def test_b26_identical_calls_stop_a_looping_model(mode):
    runs: list[str] = []

    @tool
    def analyze(input_data: str) -> str:
        """Analyze data."""
        runs.append(input_data)
        return "Instructions: " + "please provide input_data. " * 80  # ~2 kB

    round_usage = Usage(10, 5)
    model = ScriptedChatModel(
        [tool_call_response(("analyze", {"input_data": ""}), usage=round_usage)], repeat=True
    )
    response, _ = await run(client_for(model).prompt("analyze").tools(analyze), mode)
    assert len(runs) == 3
    assert len(model.prompts) == 4
    (generation,) = response.generations
    assert generation.finish_reason == "toolCallLimitExceeded"
    assert generation.text.startswith("Identical tool call limit (3) exceeded for tool 'analyze'")
    assert response.metadata.usage == Usage(40, 20)
    # No dangling tool call is handed back: the final message is plain text.
    assert not generation.output.tool_calls


@pytest.mark.parametrize("mode", MODES)
async def test_different_arguments_are_not_identical_calls(mode):
    model = ScriptedChatModel(
        [tool_call_response(("weather", {"city": c})) for c in "ABCDE"] + ["five cities"]
    )
    response, _ = await run(client_for(model).prompt("x").tools(weather), mode)
    assert response.text == "five cities"


async def test_identical_means_same_canonical_json():
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", '{"city": "A"}')),
            tool_call_response(("weather", '{ "city":"A" }')),
            tool_call_response(("weather", {"city": "A"})),
            tool_call_response(("weather", {"city": "A"})),
        ]
    )
    response = (await client_for(model).prompt("x").tools(weather).acall()).chat_response()
    assert response.result.finish_reason == "toolCallLimitExceeded"
    assert len(model.prompts) == 4


@pytest.mark.parametrize("mode", MODES)
async def test_history_disabled_sends_system_and_latest_tool_responses_only(mode):
    model = ScriptedChatModel([tool_call_response(("weather", {"city": "A"})), "ok"] * 2)
    advisor = ToolCallingAdvisor(conversation_history_enabled=False)
    client = client_for(model, advisor)
    await run(client.prompt("x").system("be brief").tools(weather), mode)
    second = model.prompts[1].instructions
    assert second[0] == SystemMessage("be brief")
    assert isinstance(second[1], ToolResponseMessage) and len(second) == 2
    # Without a system message none is invented (fix for defect 5.4.27).
    await run(client.prompt("x").tools(weather), mode)
    fourth = model.prompts[3].instructions
    assert len(fourth) == 1 and isinstance(fourth[0], ToolResponseMessage)


@pytest.mark.parametrize("mode", MODES)
async def test_history_disabled_still_counts_limits_over_the_whole_turn(mode):
    model = ScriptedChatModel([tool_call_response(("weather", {"city": "A"}))], repeat=True)
    client = client_for(model, ToolCallingAdvisor(conversation_history_enabled=False))
    response, _ = await run(client.prompt("x").tools(weather), mode)
    assert response.result.finish_reason == "toolCallLimitExceeded"
    assert len(model.prompts) == 4


@pytest.mark.parametrize("mode", MODES)
async def test_b12_usage_is_summed_over_rounds(mode):
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "A"}), usage=Usage(100, 20, 120)),
            ChatResponse.of_text("sunny", usage=Usage(150, 30, 180)),
        ]
    )
    response, chunks = await run(client_for(model).prompt("x").tools(weather), mode)
    assert response.metadata.usage == Usage(250, 50, 300)
    assert response.metadata[ROUND_USAGES] == (
        {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
        {"prompt_tokens": 150, "completion_tokens": 30, "total_tokens": 180},
    )
    if chunks is not None:
        carrying = [c for c in chunks if c.chat_response and c.chat_response.metadata.usage]
        assert carrying[-1].chat_response.metadata.usage == Usage(250, 50, 300)


@pytest.mark.parametrize("mode", MODES)
async def test_b12_return_direct_after_round_one_reports_round_one(mode):
    model = ScriptedChatModel([tool_call_response(("book", {"room": "A"}), usage=Usage(100, 20))])
    response, _ = await run(client_for(model).prompt("x").tools(book), mode)
    assert response.metadata.usage == Usage(100, 20, 120)


async def test_b12_stream_with_incremental_usage_chunks():
    round_one = [
        ChatResponse((), ChatResponseMetadata(usage=Usage(100, 0))),
        tool_call_response(("weather", {"city": "A"}), usage=Usage(0, 20)),
    ]
    round_two = [
        # Decreasing counts: unambiguously increments (1 then 29 would read as cumulative).
        ChatResponse.of_text("sun", finish_reason=None, usage=Usage(150, 20)),
        ChatResponse.of_text("ny", usage=Usage(0, 10)),
    ]
    model = ScriptedChatModel([round_one, round_two])
    response, _ = await run(client_for(model).prompt("x").tools(weather), "stream")
    assert response.text == "sunny"
    assert response.metadata.usage == Usage(250, 50, 300)


async def test_held_stream_never_leaks_text_of_a_tool_call_round():
    model = ScriptedChatModel(
        [
            ["Let me ", "check. ", tool_call_response(("weather", {"city": "A"}))],
            ["It is ", "sunny."],
        ]
    )
    client = client_for(model, ToolCallingAdvisor(round_streaming="hold"))
    texts = [t async for t in client.prompt("x").tools(weather).stream().content()]
    assert texts == ["It is ", "sunny."]


async def test_default_stream_hides_rounds_that_start_with_a_tool_call_and_streams_answers():
    model = ScriptedChatModel(
        [[tool_call_response(("weather", {"city": "A"}))], ["It is ", "sunny", "."]],
        chunk_delay=0.05,
    )
    spec = client_for(model).prompt("x").tools(weather)
    stream = spec.stream().content()
    assert await anext(stream) == "It is "
    assert model.events == ["stream", "complete", "stream"]  # the answer round is still running
    assert [t async for t in stream] == ["sunny", "."]


def test_round_streaming_mode_is_validated():
    with pytest.raises(ValueError, match="round_streaming must be one of"):
        ToolCallingAdvisor(round_streaming="fast")


async def test_eager_stream_forwards_text_but_never_tool_call_chunks():
    model = ScriptedChatModel(
        [
            ["Let me ", "check. ", tool_call_response(("weather", {"city": "A"}))],
            ["It is ", "sunny."],
        ]
    )
    client = client_for(model, ToolCallingAdvisor(round_streaming="eager"))
    chunks = [c async for c in client.prompt("x").tools(weather).stream().chat_client_responses()]
    texts = [
        c.chat_response.text for c in chunks if c.chat_response and c.chat_response.generations
    ]
    assert texts == ["Let me ", "check. ", "It is ", "sunny."]
    assert not any(c.chat_response and c.chat_response.has_tool_calls() for c in chunks)


async def test_early_close_of_the_stream_cancels_the_model_round():
    model = ScriptedChatModel([tool_call_response(("weather", {"city": "A"})), ["a", "b", "c"]])
    client = client_for(model, ToolCallingAdvisor(round_streaming="eager"))
    stream = client.prompt("x").tools(weather).stream().content()
    assert await anext(stream) == "a"
    await stream.aclose()
    assert model.events == ["stream", "complete", "stream", "cancel"]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_names_resolve_through_the_registry(mode):
    registry = ToolRegistry([weather])
    model = ScriptedChatModel([tool_call_response(("weather", {"city": "A"})), "ok"])
    client = client_for(model, tool_calling_manager=ToolCallingManager(tool_registry=registry))
    response, _ = await run(client.prompt("x").tools("weather"), mode)
    assert response.text == "ok"
    sent_options = model.prompts[0].options
    assert [cb.name for cb in sent_options.tool_callbacks] == ["weather"]
    assert sent_options.tool_names == ()


@pytest.mark.parametrize("mode", MODES)
async def test_internal_tool_execution_disabled_returns_the_tool_calls(mode):
    model = ScriptedChatModel([tool_call_response(("weather", {"city": "A"}))])
    options = ToolCallingChatOptions(
        tool_callbacks=(weather,), internal_tool_execution_enabled=False
    )
    response, _ = await run(client_for(model).prompt("x").options(options), mode)
    assert response.has_tool_calls()


@pytest.mark.parametrize("mode", MODES)
async def test_custom_eligibility_checker_decides_what_is_a_tool_round(mode):
    model = ScriptedChatModel([tool_call_response(("weather", {"city": "A"}))])
    advisor = ToolCallingAdvisor(tool_execution_eligibility_checker=lambda r: False)
    response, _ = await run(client_for(model, advisor).prompt("x").tools(weather), mode)
    assert response.has_tool_calls()


def test_order_must_be_strictly_inside_the_precedence_range():
    from advisors_app.core import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE

    for bad in (HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE):
        with pytest.raises(ValueError, match="advisorOrder must be between"):
            ToolCallingAdvisor(order=bad)
    assert ToolCallingAdvisor().order == HIGHEST_PRECEDENCE + 300
    assert ToolCallingAdvisor().name == "Tool Calling Advisor"


def test_build_generations_of_a_result_without_tool_responses_is_empty():
    result = ToolExecutionResult((UserMessage("x"), AssistantMessage("y")))
    assert ToolExecutionResult.build_generations(result) == ()
