"""Tool-call emulation by constrained decoding: the schema, the decoding, call and stream alike."""

from __future__ import annotations

import json
from types import SimpleNamespace

import jsonschema
import pytest

from advisors_app.core import (
    AssistantMessage,
    ChatOptions,
    ChatResponseAccumulator,
    MalformedResponseError,
    Prompt,
    SystemMessage,
    ToolCall,
    ToolCallingChatOptions,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.core.providers.tool_emulation import ToolCallEmulation, tool_spec
from advisors_app.core.streams import closing_stream
from advisors_app.core.tools import ToolDefinition
from tests.core.providers.openai_server import Completion, ScriptedOpenAiServer
from tests.core.providers.tools import WEATHER

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CLOCK = {
    "type": "function",
    "function": {
        "name": "get_time",
        "description": "Current time.",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    },
}


def plan(response_format=None) -> ToolCallEmulation:
    return ToolCallEmulation([tool_spec(WEATHER), tool_spec(CLOCK)], response_format)


def decode(emulation: ToolCallEmulation, pieces: list[str], finish: str | None = "STOP"):
    output = emulation.output()
    emitted = [output.feed(piece) for piece in pieces]
    rest, calls, reason = output.finish(finish)
    return emitted, rest, calls, reason


def test_tool_definitions_are_read_from_callbacks_objects_and_mappings() -> None:
    as_text = SimpleNamespace(name="get_weather", description="", input_schema=json.dumps(CITY))
    assert tool_spec(as_text)["parameters"] == CITY
    assert tool_spec(ToolDefinition("get_weather", "Weather.", CITY))["description"] == "Weather."
    assert tool_spec(WEATHER)["description"] == "Get the current weather for a city."
    assert tool_spec(CLOCK)["name"] == "get_time"
    assert tool_spec({"name": "noop"})["parameters"] == {"type": "object", "properties": {}}
    with pytest.raises(ValueError, match="cannot read a tool definition"):
        tool_spec(object())


def test_tools_are_listed_as_signatures() -> None:
    enum = {"type": "object", "properties": {"unit": {"enum": ["C", "F"]}, "days": {}}}
    emulation = ToolCallEmulation(
        [tool_spec(CLOCK), tool_spec({"name": "f", "parameters": enum})], None
    )
    text = emulation.instructions()
    assert "- get_time(tz: string (optional)): Current time." in text
    assert '- f(unit: "C" | "F" (optional), days: any (optional)): ' in text


def test_the_schema_allows_exactly_a_known_call_or_an_answer() -> None:
    schema = plan().response_format()["json_schema"]["schema"]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"tool": "get_weather", "arguments": {"city": "Oslo"}})
    assert validator.is_valid({"tool": "get_time", "arguments": {}})
    assert validator.is_valid({"answer": "hello"})
    assert not validator.is_valid({"tool": "get_weather", "arguments": {}})  # city is required
    assert not validator.is_valid({"tool": "rm_rf", "arguments": {}})
    assert not validator.is_valid({"tool": "get_time", "arguments": {"tz": "UTC", "x": 1}})
    assert not validator.is_valid({"answer": "hi", "tool": "get_time"})
    assert not validator.is_valid({"answer": 3})


def test_a_structured_output_format_becomes_the_answer_schema() -> None:
    city = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "c", "schema": city}}
    schema = plan(response_format).response_format()["json_schema"]["schema"]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid({"answer": {"name": "Oslo"}})
    assert not validator.is_valid({"answer": "Oslo"})
    emitted, rest, calls, _ = decode(plan(response_format), ['{"answer": {"na', 'me": "Oslo"}}'])
    assert emitted == ["", ""] and json.loads(rest) == {"name": "Oslo"} and calls == ()


def test_an_answer_streams_decoded_text_holding_back_half_escapes() -> None:
    pieces = ['{ "ans', 'wer": "Hel', "lo \\", 'n\\"w', "orld\\u00", "e9 \\ud83d", '\\ude00"}']
    emitted, rest, calls, reason = decode(plan(), pieces)
    assert emitted == ["", "Hel", "lo ", '\n"w', "orld", "é ", "😀"]
    assert "".join(emitted) + rest == 'Hello \n"worldé 😀'
    assert (calls, reason) == ((), "STOP")


def test_a_tool_call_emits_nothing_until_it_is_complete() -> None:
    pieces = ['{"tool": "get_', 'weather", "argu', 'ments": {"city": "Os', 'lo"}}']
    emitted, rest, calls, reason = decode(plan(), pieces)
    assert emitted == ["", "", "", ""] and rest == ""
    (call,) = calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Oslo"})
    assert call.id.startswith("call_") and reason == "TOOL_CALLS"


def test_output_cut_short() -> None:
    emitted, rest, calls, reason = decode(plan(), ['{"answer": "Hello wor'], "LENGTH")
    assert ("".join(emitted) + rest, calls, reason) == ("Hello wor", (), "LENGTH")
    with pytest.raises(MalformedResponseError, match="finish reason LENGTH"):
        decode(plan(), ['{"tool": "get_weather", "arguments": {"ci'], "LENGTH")
    with pytest.raises(MalformedResponseError, match="neither a complete tool call"):
        decode(plan(), ["I think the weather is nice"])


def test_history_shows_earlier_calls_and_results_in_the_emulated_form() -> None:
    call = AssistantMessage("", tool_calls=[ToolCall("c1", "get_weather", '{"city":"Oslo"}')])
    result = ToolResponseMessage([ToolResponse("c1", "get_weather", "rain")])
    assert ToolCallEmulation.history_messages(call) == [
        {"role": "assistant", "content": '{"tool": "get_weather", "arguments": {"city": "Oslo"}}'}
    ]
    (message,) = ToolCallEmulation.history_messages(result)
    assert message["role"] == "user"
    assert message["content"].startswith("Result of tool get_weather: rain\n")


@pytest.fixture
def emulating(openai_server: ScriptedOpenAiServer) -> OpenAiCompatibleChatModel:
    return OpenAiCompatibleChatModel(
        model="tiny", base_url=openai_server.base_url, max_retries=0, tool_call_emulation=True
    )


async def test_emulated_requests_use_response_format_not_tools(
    openai_server: ScriptedOpenAiServer, emulating: OpenAiCompatibleChatModel
) -> None:
    openai_server.add(Completion('{"answer": "Sunny."}'))
    history = [
        SystemMessage("Be brief."),
        UserMessage("Weather in Oslo?"),
        AssistantMessage("", tool_calls=[ToolCall("c1", "get_weather", '{"city":"Oslo"}')]),
        ToolResponseMessage([ToolResponse("c1", "get_weather", "sunny")]),
    ]
    response = await emulating.call(
        Prompt(history, ToolCallingChatOptions(tool_callbacks=[WEATHER]))
    )
    assert response.text == "Sunny." and not response.has_tool_calls()
    body = openai_server.bodies[0]
    assert "tools" not in body
    assert body["response_format"]["type"] == "json_schema"
    system, _user, assistant, result = body["messages"]
    assert system["content"].startswith("Be brief.\n\nYou can call tools.")
    assert "- get_weather(city: string): Get the current weather for a city." in system["content"]
    assert assistant == {
        "role": "assistant",
        "content": '{"tool": "get_weather", "arguments": {"city": "Oslo"}}',
    }
    assert result["role"] == "user" and "sunny" in result["content"]


async def test_without_tools_the_emulating_model_is_a_plain_model(
    openai_server: ScriptedOpenAiServer, emulating: OpenAiCompatibleChatModel
) -> None:
    openai_server.add(Completion("plain"))
    assert (await emulating.call(Prompt("hi", ChatOptions()))).text == "plain"
    assert "response_format" not in openai_server.bodies[0]


@pytest.mark.parametrize(
    ("raw", "text", "calls"),
    [
        ('{"answer": "It is sunny in Oslo."}', "It is sunny in Oslo.", ()),
        (
            '{"tool": "get_weather", "arguments": {"city": "Oslo"}}',
            "",
            (("get_weather", {"city": "Oslo"}),),
        ),
    ],
)
async def test_call_and_stream_decode_alike(
    openai_server: ScriptedOpenAiServer,
    emulating: OpenAiCompatibleChatModel,
    raw: str,
    text: str,
    calls: tuple,
) -> None:
    openai_server.add(Completion(raw, chunk_size=3), Completion(raw, chunk_size=3))
    prompt = Prompt("Weather in Oslo?", ToolCallingChatOptions(tool_callbacks=[WEATHER]))
    called = await emulating.call(prompt)
    accumulator = ChatResponseAccumulator()
    deltas = []
    async with closing_stream(emulating.stream(prompt)) as chunks:
        async for chunk in chunks:
            accumulator.add(chunk)
            deltas += [g.text for g in chunk.generations if g.text]
    streamed = accumulator.result()
    for response in (called, streamed):
        assert response.text == text
        got = tuple((c.name, json.loads(c.arguments)) for c in response.result.output.tool_calls)
        assert got == calls
        assert response.result.finish_reason == ("TOOL_CALLS" if calls else "STOP")
        assert response.metadata.usage.total_tokens == 17
    # Text answers arrive in several deltas; no raw JSON ever reaches the consumer.
    assert "".join(deltas) == text and (not text or len(deltas) > 2)
    assert not any("{" in delta for delta in deltas)


async def test_past_the_round_cap_only_an_answer_is_allowed(
    openai_server: ScriptedOpenAiServer,
) -> None:
    model = OpenAiCompatibleChatModel(
        model="tiny",
        base_url=openai_server.base_url,
        max_retries=0,
        tool_call_emulation=True,
        emulated_tool_rounds=1,
    )
    openai_server.add(Completion('{"answer": "a"}'), Completion('{"answer": "b"}'))
    options = ToolCallingChatOptions(tool_callbacks=[WEATHER])
    first = [UserMessage("Weather in Oslo?")]
    after = [
        *first,
        AssistantMessage("", tool_calls=[ToolCall("c1", "get_weather", '{"city":"Oslo"}')]),
        ToolResponseMessage([ToolResponse("c1", "get_weather", "sunny")]),
    ]
    await model.call(Prompt(first, options))
    await model.call(Prompt(after, options))
    schemas = [b["response_format"]["json_schema"]["schema"] for b in openai_server.bodies]
    assert [len(schema["anyOf"]) for schema in schemas] == [2, 1]
    assert schemas[1]["anyOf"][0]["required"] == ["answer"]
    # A new user message starts a new turn: calls are allowed again.
    openai_server.add(Completion('{"answer": "c"}'))
    await model.call(Prompt([*after, AssistantMessage("b"), UserMessage("And Rome?")], options))
    assert len(openai_server.bodies[2]["response_format"]["json_schema"]["schema"]["anyOf"]) == 2
