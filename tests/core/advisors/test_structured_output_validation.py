"""StructuredOutputValidationAdvisor: Spring's retry rule and messages, fixes, streams, entity()."""

from __future__ import annotations

import dataclasses

import pytest

from advisors_app.core import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    STRUCTURED_OUTPUT_NATIVE,
    AssistantMessage,
    CallAdvisor,
    ChatClient,
    ChatResponse,
    Generation,
    OutputValidationError,
    ScriptedChatModel,
    StreamAdvisor,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    Usage,
)
from advisors_app.core.advisors import StructuredOutputValidationAdvisor
from advisors_app.core.advisors.structured_output_validation import (
    STRUCTURED_OUTPUT_ATTEMPTS,
    STRUCTURED_OUTPUT_ERROR,
    STRUCTURED_OUTPUT_VALID,
)
from advisors_app.core.streams import closing_stream

from .helpers import aggregate, run, stream, texts

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
    "required": ["name", "age"],
}
RETRY = "Output JSON validation failed because of: "
MODES = ["call", "stream"]


@dataclasses.dataclass
class Person:
    name: str
    age: int


def client_of(*script, advisor=None, extra=()):
    model = ScriptedChatModel(list(script))
    advisor = advisor or StructuredOutputValidationAdvisor(output_json_schema=SCHEMA)
    return ChatClient(model, default_advisors=[*extra, advisor]), model


def test_constructor_rules_and_spring_messages():
    advisor = StructuredOutputValidationAdvisor(output_type=Person)
    assert advisor.name == "Structured Output Validation Advisor"
    assert advisor.order == LOWEST_PRECEDENCE - 2000
    assert advisor.json_schema["required"] == ["name", "age"]
    cases = [
        (
            {"output_type": Person, "output_json_schema": SCHEMA},
            "Only outputType or outputJsonSchema can be set, not both.",
        ),
        ({}, "Either outputType or outputJsonSchema must be set."),
        ({"output_json_schema": "{not json"}, "Failed to parse JSON schema"),
        ({"output_json_schema": {"type": 12}}, "Failed to parse JSON schema"),
        (
            {"output_type": Person, "max_repeat_attempts": -1},
            "repeatAttempts must be greater than or equal to 0",
        ),
        (
            {"output_type": Person, "order": HIGHEST_PRECEDENCE},
            "advisorOrder must be between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE",
        ),
        ({"output_type": Person, "order": LOWEST_PRECEDENCE}, "advisorOrder must be between"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ValueError) as info:
            StructuredOutputValidationAdvisor(**kwargs)
        assert str(info.value).startswith(message)


def test_validation_messages():
    advisor = StructuredOutputValidationAdvisor(output_json_schema=SCHEMA)
    assert advisor.validate(None) == "Missing required json output for validation."
    assert advisor.validate("  ") == "Empty JSON output for validation."
    assert advisor.validate("{oops").startswith("Invalid JSON: ")
    assert advisor.validate('{"name": 1}') == (
        "$: 'age' is a required property; $.name: 1 is not of type 'string'"
    )
    assert advisor.validate('```json\n{"name": "a", "age": 1, "extra": true}\n```') is None
    # Python's parser reads them, RFC 8259 does not; NaN would pass any minimum/maximum.
    for constant in ("NaN", "Infinity", "-Infinity"):
        error = advisor.validate('{"name": "a", "age": ' + constant + "}")
        assert error is not None and f"{constant} is not JSON" in error


@pytest.mark.parametrize("mode", MODES)
async def test_valid_first_answer(mode):
    client, model = client_of('{"name": "Ann", "age": 3}')
    response = await run(mode, client, "Who?")
    assert response.chat_response.text == '{"name": "Ann", "age": 3}'
    assert response.context[STRUCTURED_OUTPUT_VALID] is True
    assert response.context[STRUCTURED_OUTPUT_ATTEMPTS] == 1
    assert response.chat_response.metadata[STRUCTURED_OUTPUT_VALID] is True
    assert len(model.prompts) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_retry_appends_only_the_latest_error_to_the_original_user_text(mode):
    client, model = client_of(
        ChatResponse.of_text("not json", usage=Usage(10, 2)),
        ChatResponse.of_text('{"name": "Ann"}', usage=Usage(20, 3)),
        ChatResponse.of_text('{"name": "Ann", "age": 3}', usage=Usage(30, 4)),
    )
    response = await run(mode, client, "Who?")
    users = [p.user_message.text for p in model.prompts]
    assert users[0] == "Who?"
    assert users[1].startswith("Who?\n" + RETRY + "Invalid JSON: ")
    assert users[2] == "Who?\n" + RETRY + "$: 'age' is a required property"
    assert response.chat_response.text == '{"name": "Ann", "age": 3}'
    assert response.chat_response.metadata.usage == Usage(60, 9)
    assert response.context[STRUCTURED_OUTPUT_ATTEMPTS] == 3


async def test_stream_sends_only_the_returned_attempt():
    client, _ = client_of(["no", "t json"], ['{"name": "Ann", ', '"age": 3}'])
    chunks = await stream(client, "Who?")
    assert "".join(texts(chunks)) == '{"name": "Ann", "age": 3}'
    assert chunks[-1].chat_response.generations == ()
    assert chunks[-1].context[STRUCTURED_OUTPUT_VALID] is True


@pytest.mark.parametrize("mode", MODES)
async def test_exhausted_attempts_are_flagged(mode):
    client, model = client_of("a", "b", "c", "d")
    response = await run(mode, client, "Who?")
    assert len(model.prompts) == 4
    assert response.chat_response.text == "d"
    assert response.context[STRUCTURED_OUTPUT_VALID] is False
    assert response.context[STRUCTURED_OUTPUT_ATTEMPTS] == 4
    assert response.context[STRUCTURED_OUTPUT_ERROR].startswith("Invalid JSON")


@pytest.mark.parametrize("mode", MODES)
async def test_exhausted_attempts_can_raise(mode):
    advisor = StructuredOutputValidationAdvisor(
        output_type=Person, max_repeat_attempts=1, raise_on_failure=True
    )
    client, model = client_of("a", "b", advisor=advisor)
    with pytest.raises(OutputValidationError) as info:
        await run(mode, client, "Who?")
    assert info.value.attempts == 2 and info.value.output == "b"
    assert len(model.prompts) == 2


def tool_call_response(usage=None) -> ChatResponse:
    message = AssistantMessage("", tool_calls=(ToolCall("c1", "age_of", '{"name": "Ann"}'),))
    return ChatResponse((Generation(message),)).with_usage(usage)


class MiniToolLoop(CallAdvisor, StreamAdvisor):
    """Just enough of a tool loop: answers every tool call with "3" and asks again."""

    order = HIGHEST_PRECEDENCE + 300

    def _next(self, request, response):
        output = response.chat_response.result.output
        answers = ToolResponseMessage(
            tuple(ToolResponse(c.id, c.name, "3") for c in output.tool_calls)
        )
        messages = [*request.prompt.instructions, output, answers]
        return request.mutate(prompt=request.prompt.mutate(messages=messages))

    async def advise_call(self, request, chain):
        while True:
            response = await chain.next_call(request)
            if not response.chat_response.has_tool_calls():
                return response
            request = self._next(request, response)

    async def advise_stream(self, request, chain):
        while True:
            chunks = []
            async with closing_stream(chain.next_stream(request)) as stream_:
                async for chunk in stream_:
                    chunks.append(chunk)
            response = aggregate(chunks)
            if not response.chat_response.has_tool_calls():
                for chunk in chunks:
                    yield chunk
                return
            request = self._next(request, response)


@pytest.mark.parametrize("mode", MODES)
async def test_tool_call_responses_pass_through_without_using_attempts(mode):
    # Spring AI re-sends the request on a tool call (defect 5.4.24); here the tool runs once and
    # the final answer is validated with a fresh set of attempts. ToolCallingAdvisor (branch
    # `tools`) replaces MiniToolLoop in this test once it is on main.
    advisor = StructuredOutputValidationAdvisor(output_type=Person, max_repeat_attempts=1)
    client, model = client_of(
        tool_call_response(Usage(5, 1)),
        "not json",
        '{"name": "Ann", "age": 3}',
        advisor=advisor,
        extra=[MiniToolLoop()],
    )
    response = await run(mode, client, "How old is Ann?")
    assert len(model.prompts) == 3
    assert isinstance(model.prompts[1].instructions[-1], ToolResponseMessage)
    assert model.prompts[2].user_message.text.startswith("How old is Ann?\n" + RETRY)
    assert response.chat_response.text == '{"name": "Ann", "age": 3}'
    assert response.context[STRUCTURED_OUTPUT_ATTEMPTS] == 2


@pytest.mark.parametrize("mode", MODES)
async def test_tool_call_after_a_failed_attempt_carries_both_rounds_usage(mode):
    advisor = StructuredOutputValidationAdvisor(output_type=Person)
    client, _ = client_of(
        ChatResponse.of_text("nope", usage=Usage(10, 1)),
        tool_call_response(Usage(20, 2)),
        advisor=advisor,
    )
    response = await run(mode, client, "How old?")
    assert response.chat_response.has_tool_calls()
    assert response.chat_response.metadata.usage == Usage(30, 3)
    assert STRUCTURED_OUTPUT_VALID not in response.context


@pytest.mark.parametrize("mode", MODES)
async def test_entity_adds_format_instructions_in_call_and_stream(mode):
    model = ScriptedChatModel(['{"name": "Ann", "age": 3}'])
    client = ChatClient(model)
    spec = client.prompt("Who?")
    if mode == "call":
        person = await spec.call().aentity(Person)
    else:
        person = await spec.stream().entity(Person)
    assert person == Person("Ann", 3)
    user_text = model.prompts[0].user_message.text
    assert user_text.startswith("Who?\nYour response should be in JSON format.")
    assert '"required": [\n    "name",\n    "age"\n  ]' in user_text


@pytest.mark.parametrize("mode", MODES)
async def test_entity_native_structured_output_sends_the_schema_in_call_and_stream(mode):
    model = ScriptedChatModel(['{"name": "Ann", "age": 3}'])
    spec = ChatClient(model).prompt("Who?").advisor_param(STRUCTURED_OUTPUT_NATIVE, True)
    if mode == "call":
        await spec.call().aentity(Person)
    else:
        await spec.stream().entity(Person)
    prompt = model.prompts[0]
    assert prompt.user_message.text == "Who?"
    assert prompt.options.response_format["json_schema"]["schema"]["required"] == ["name", "age"]


@pytest.mark.parametrize("mode", MODES)
async def test_entity_with_the_validation_advisor_retries_into_a_valid_entity(mode):
    advisor = StructuredOutputValidationAdvisor(output_type=Person)
    model = ScriptedChatModel(["sorry", '{"name": "Ann", "age": 3}'])
    spec = ChatClient(model, default_advisors=[advisor]).prompt("Who?")
    if mode == "call":
        person = await spec.call().aentity(Person)
    else:
        person = await spec.stream().entity(Person)
    assert person == Person("Ann", 3)
    retried = model.prompts[1].user_message.text
    assert "Your response should be in JSON format." in retried and RETRY in retried
