"""``OpenAiCompatibleChatModel`` against a scripted loopback server: requests, answers, streams."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from advisors_app.core import (
    AssistantMessage,
    AuthenticationError,
    ChatOptions,
    ChatResponseAccumulator,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolCallingChatOptions,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.core.streams import closing_stream
from tests.core.providers.openai_server import (
    Completion,
    ScriptedOpenAiServer,
    SseReply,
    chunk,
    wait_for,
)
from tests.core.providers.tools import WEATHER, WEATHER_SCHEMA


def model_on(server: ScriptedOpenAiServer, **kwargs) -> OpenAiCompatibleChatModel:
    kwargs.setdefault("max_retries", 0)
    return OpenAiCompatibleChatModel(model="scripted-model", base_url=server.base_url, **kwargs)


async def collect(model: OpenAiCompatibleChatModel, prompt: Prompt):
    accumulator = ChatResponseAccumulator()
    chunks = []
    async with closing_stream(model.stream(prompt)) as stream:
        async for item in stream:
            chunks.append(item)
            accumulator.add(item)
    return chunks, accumulator.result()


async def test_options_messages_and_tools_are_sent(openai_server: ScriptedOpenAiServer) -> None:
    openai_server.add(Completion("ok"))
    model = model_on(
        openai_server,
        api_key="sk-test",
        default_options=ChatOptions(temperature=0.5, max_tokens=99, extra={"user": "u1"}),
    )
    history = [
        SystemMessage("be brief"),
        UserMessage("weather?"),
        AssistantMessage("", tool_calls=[ToolCall("c1", "get_weather", '{"city":"Oslo"}')]),
        ToolResponseMessage([ToolResponse("c1", "get_weather", "rain")]),
    ]
    options = ToolCallingChatOptions(
        model="other-model", max_tokens=10, stop=("END",), seed=7, top_k=3, tool_callbacks=[WEATHER]
    )
    await model.call(Prompt(history, options))
    (request,) = openai_server.requests
    body = request.body
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert body["model"] == "other-model"
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.5, 10, 7)
    assert (body["stop"], body["top_k"], body["user"]) == (["END"], 3, "u1")
    assert "stream" not in body
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "rain"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get the current weather for a city.",
                "parameters": WEATHER_SCHEMA,
            },
        }
    ]


async def test_a_json_schema_response_format_is_sent(openai_server: ScriptedOpenAiServer) -> None:
    response_format = {
        "type": "json_schema",
        "json_schema": {"name": "city", "schema": {"type": "object"}, "strict": True},
    }
    openai_server.add(Completion('{"name": "Oslo"}'))
    response = await model_on(openai_server).call(
        Prompt("a city", ChatOptions(response_format=response_format))
    )
    assert openai_server.bodies[0]["response_format"] == response_format
    assert json.loads(response.text) == {"name": "Oslo"}


async def test_streams_ask_for_usage_unless_told_not_to(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(Completion("a"), Completion("b", usage=None))
    await collect(model_on(openai_server), Prompt("x"))
    _chunks, aggregated = await collect(model_on(openai_server, include_usage=False), Prompt("x"))
    first, second = openai_server.bodies
    assert first["stream"] is True and first["stream_options"] == {"include_usage": True}
    assert second["stream"] is True and "stream_options" not in second
    # B11: no usage reported means "unknown", never a silent zero.
    assert aggregated.text == "b" and aggregated.metadata.usage is None


async def test_usage_keeps_cached_tokens_and_the_native_dict_in_call_and_stream(
    openai_server: ScriptedOpenAiServer,
) -> None:
    usage = {
        "prompt_tokens": 12,
        "completion_tokens": 2,
        "total_tokens": 14,
        "prompt_tokens_details": {"cached_tokens": 8},
    }
    openai_server.add(Completion("Hello", usage=usage), Completion("Hello", usage=usage))
    called = await model_on(openai_server).call(Prompt("x"))
    chunks, streamed = await collect(model_on(openai_server), Prompt("x"))
    for response in (called, streamed):
        got = response.metadata.usage
        assert (got.prompt_tokens, got.completion_tokens, got.total_tokens) == (12, 2, 14)
        assert got.cached_prompt_tokens == 8
        assert got.native["prompt_tokens_details"]["cached_tokens"] == 8
    # Only the final chunk (no choices) carries usage; it has no generations.
    assert chunks[-1].generations == ()
    assert chunks[-1].metadata.usage == streamed.metadata.usage


@pytest.mark.parametrize(
    ("sent", "reported"),
    [
        ("stop", "STOP"),
        ("length", "LENGTH"),
        ("tool_calls", "TOOL_CALLS"),
        ("content_filter", "CONTENT_FILTER"),
    ],
)
async def test_finish_reasons_are_spring_names(
    openai_server: ScriptedOpenAiServer, sent: str, reported: str
) -> None:
    openai_server.add(Completion("x", finish_reason=sent), Completion("x", finish_reason=sent))
    assert (await model_on(openai_server).call(Prompt("x"))).result.finish_reason == reported
    _, aggregated = await collect(model_on(openai_server), Prompt("x"))
    assert aggregated.result.finish_reason == reported


async def test_streamed_parallel_tool_call_deltas_are_assembled(
    openai_server: ScriptedOpenAiServer,
) -> None:
    calls = [
        {"id": "call_a", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_b", "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
    ]
    openai_server.add(Completion(tool_calls=calls, finish_reason="tool_calls", chunk_size=3))
    chunks, aggregated = await collect(model_on(openai_server), Prompt("x"))
    fragments = [c for chunk_ in chunks for g in chunk_.generations for c in g.output.tool_calls]
    assert len(fragments) > 4
    assert all(f.index in (0, 1) for f in fragments)
    assert aggregated.result.output.tool_calls == (
        ToolCall("call_a", "get_weather", '{"city": "Oslo"}'),
        ToolCall("call_b", "get_weather", '{"city": "Rome"}'),
    )
    assert aggregated.result.finish_reason == "TOOL_CALLS"


async def test_choices_of_a_stream_are_aggregated_by_index(
    openai_server: ScriptedOpenAiServer,
) -> None:
    events = [
        chunk("a", index=0),
        chunk("x", index=1),
        chunk("b", index=0),
        chunk("y", index=1, finish_reason="stop"),
        chunk(index=0, finish_reason="stop"),
    ]
    openai_server.add(SseReply(events))
    _, aggregated = await collect(model_on(openai_server), Prompt("x"))
    assert [g.text for g in aggregated.results] == ["ab", "xy"]


async def test_closing_a_stream_early_closes_the_http_response(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(SseReply([chunk(f"t{i} ") for i in range(200)], delay=0.02))
    stream = model_on(openai_server).stream(Prompt("x"))
    await anext(stream)
    await anext(stream)
    await stream.aclose()
    assert wait_for(lambda: openai_server.disconnects == ["/v1/chat/completions"])


async def test_a_key_from_an_unset_environment_variable_fails_before_any_request(
    openai_server: ScriptedOpenAiServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ADVISORS_TEST_KEY", raising=False)
    model = model_on(openai_server, api_key_env="ADVISORS_TEST_KEY")
    with pytest.raises(AuthenticationError, match="ADVISORS_TEST_KEY"):
        await model.call(Prompt("x"))
    with pytest.raises(AuthenticationError, match="ADVISORS_TEST_KEY"):
        await anext(model.stream(Prompt("x")))
    assert openai_server.requests == []
    monkeypatch.setenv("ADVISORS_TEST_KEY", "sk-from-env")
    openai_server.add(Completion("ok"))
    assert (await model.call(Prompt("x"))).text == "ok"
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-from-env"
    assert "sk-from-env" not in repr(model)


def test_one_model_serves_several_event_loops(openai_server: ScriptedOpenAiServer) -> None:
    model = model_on(openai_server)
    openai_server.add(*(Completion(f"answer {i}") for i in range(3)))
    answers = [asyncio.run(model.call(Prompt("x"))).text]
    thread_answers: list[str] = []

    def in_thread() -> None:
        thread_answers.append(asyncio.run(model.call(Prompt("x"))).text)

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    answers.append(asyncio.run(model.call(Prompt("x"))).text)
    assert sorted(answers + thread_answers) == ["answer 0", "answer 1", "answer 2"]


def test_configuration_errors_name_the_bad_value() -> None:
    with pytest.raises(ValueError, match="model cannot be null"):
        OpenAiCompatibleChatModel(model="")
    with pytest.raises(ValueError, match="timeout must be a positive"):
        OpenAiCompatibleChatModel(model="m", timeout=0)
    with pytest.raises(ValueError, match="max_retries must be >= 0"):
        OpenAiCompatibleChatModel(model="m", max_retries=-1)


async def test_unresolved_tool_names_are_refused(openai_server: ScriptedOpenAiServer) -> None:
    options = ToolCallingChatOptions(
        tool_names=("get_weather", "get_time"), tool_callbacks=[WEATHER]
    )
    model = model_on(openai_server)
    with pytest.raises(ValueError, match="get_time reached the model unresolved"):
        await model.call(Prompt("x", options))
    with pytest.raises(ValueError, match="get_time reached the model unresolved"):
        await anext(model.stream(Prompt("x", options)))
    assert openai_server.requests == []
