"""Immutable values: messages, prompts, options, requests, templates, the scripted model."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from advisors_app.core import (
    AdvisorStateError,
    AssistantMessage,
    ChatClientRequest,
    ChatClientResponse,
    ChatOptions,
    ChatResponse,
    MessageType,
    Prompt,
    PromptTemplate,
    ScriptedChatModel,
    SystemMessage,
    ToolCall,
    ToolCallingChatOptions,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    merge_options,
    message_from_dict,
)
from advisors_app.core.templates import assert_balanced_braces, assert_placeholders


def test_message_equality_ignores_metadata_and_values_are_frozen():
    assert UserMessage("hi", {"timestamp": 1}) == UserMessage("hi")
    assert hash(UserMessage("hi", {"a": 1})) == hash(UserMessage("hi"))
    assert UserMessage("hi") != SystemMessage("hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        UserMessage("hi").text = "x"
    with pytest.raises(TypeError):
        UserMessage("hi", {"a": 1}).metadata["a"] = 2


def test_messages_round_trip_through_dicts_and_pickle():
    messages = [
        SystemMessage("s"),
        UserMessage("u", {"k": "v"}),
        AssistantMessage(None, tool_calls=[ToolCall("t1", "weather", '{"city": "Oslo"}')]),
        ToolResponseMessage([ToolResponse("t1", "weather", "5C")]),
    ]
    assert [message_from_dict(m.to_dict()) for m in messages] == messages
    assert pickle.loads(pickle.dumps(messages)) == messages
    assert [m.message_type for m in messages] == [
        MessageType.SYSTEM,
        MessageType.USER,
        MessageType.ASSISTANT,
        MessageType.TOOL,
    ]
    with pytest.raises(ValueError, match="message type must be one of"):
        message_from_dict({"type": "robot"})


def test_prompt_accessors_follow_spring():
    prompt = Prompt([SystemMessage("a"), UserMessage("b"), AssistantMessage("c"), UserMessage("d")])
    assert prompt.contents == "abcd"
    assert prompt.system_message == SystemMessage("a")
    assert prompt.user_message == UserMessage("d")
    assert Prompt().system_message == SystemMessage("")
    assert Prompt().user_message == UserMessage("")
    tool = ToolResponseMessage([ToolResponse("t", "n", "r")])
    assert Prompt([UserMessage("u"), tool]).last_user_or_tool_response_message == tool
    assert Prompt("text").instructions == (UserMessage("text"),)


def test_prompt_augmentation_including_empty_prompts():
    prompt = Prompt([UserMessage("first"), UserMessage("last")])
    assert prompt.augment_user_message("new").instructions[-1] == UserMessage("new")
    assert prompt.augment_user_message(lambda m: m.text + "!").user_message.text == "last!"
    assert Prompt().augment_user_message("made").instructions == (UserMessage("made"),)
    assert Prompt("u").augment_system_message("s").instructions == (
        SystemMessage("s"),
        UserMessage("u"),
    )


def test_options_merge_and_serialise():
    merged = merge_options(
        ChatOptions(model="m", temperature=0.1, extra={"a": 1}),
        ToolCallingChatOptions(temperature=0.5, tool_names=("calc",), extra={"b": 2}),
    )
    assert isinstance(merged, ToolCallingChatOptions)
    assert (merged.model, merged.temperature, merged.tool_names) == ("m", 0.5, ("calc",))
    assert merged.extra == {"a": 1, "b": 2}
    assert ChatOptions.from_dict({"model": "x", "stop": ["a"]}).to_dict() == {
        "model": "x",
        "stop": ["a"],
    }
    with pytest.raises(ValueError, match="unknown chat option"):
        ChatOptions.from_dict({"colour": "red"})


def test_requests_and_responses_context_rules():
    request = ChatClientRequest(Prompt("x"), {"a": None})
    assert request.context["a"] is None
    changed = request.mutate(context={"b": 2})
    assert changed.context == {"a": None, "b": 2} and request.context == {"a": None}
    with pytest.raises(ValueError, match="context keys cannot be null"):
        ChatClientRequest(Prompt("x"), {None: 1})
    with pytest.raises(ValueError, match="prompt cannot be null"):
        ChatClientRequest(None)
    response = ChatClientResponse(None, {"k": None})
    assert response.mutate(chat_response=ChatResponse.of_text("t")).chat_response.text == "t"
    assert ChatResponse().metadata is not None and ChatResponse().result is None


def test_templates_are_single_pass_and_check_real_placeholders():
    template = PromptTemplate("Q: {query}\nC: {context}", required=("query", "context"))
    rendered = template.render(query="{context}", context="a {query} b")
    assert rendered == "Q: {context}\nC: a {query} b"
    assert PromptTemplate('JSON like {"a": 1} and {{x}}').render() == 'JSON like {"a": 1} and {x}'
    with pytest.raises(ValueError, match="must be present in the prompt template: context"):
        assert_placeholders("the context word is not a placeholder {query}", ["query", "context"])
    with pytest.raises(ValueError, match="Missing values for template placeholders: query"):
        template.render(context="c")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("Hi {name}, {oops", "Unbalanced \"{\" at line 1, column 12 ('{oops'): close it"),
        ("a\nb }", 'Unbalanced "}" at line 2, column 3 (\'}\'): write "}}"'),
        ('{"a": {"b": 1}}', 'line 1, column 1 (\'{"a": {"b": 1}}\'): close it with "}" or'),
        ("{x} {{y} and {z}", "Unbalanced \"}\" at line 1, column 8 ('} and {z}')"),
        ('JSON {"a": {"b": 1}, "c": 2}, {{x}}, {{{y}}} and {z}', None),
    ],
)
def test_unpaired_braces_are_found_as_rendering_reads_them(text: str, error: str | None) -> None:
    if error is None:
        assert_balanced_braces(text)
        return
    with pytest.raises(ValueError) as caught:
        assert_balanced_braces(text)
    assert error in str(caught.value)


async def test_scripted_model_script_rules():
    model = ScriptedChatModel(["plain", ["a", "b"], ValueError("bad")])
    assert (await model.call(Prompt("1"))).result.finish_reason == "STOP"
    assert (await model.call(Prompt("2"))).text == "ab"
    with pytest.raises(ValueError, match="bad"):
        await model.call(Prompt("3"))
    with pytest.raises(AdvisorStateError, match="exhausted after 3"):
        await model.call(Prompt("4"))
    assert [p.user_message.text for p in model.prompts] == ["1", "2", "3", "4"]


async def test_scripted_model_callables_and_streams():
    async def answer(prompt):
        return [prompt.user_message.text, "!"]

    model = ScriptedChatModel([answer, "one"])
    assert [c.text async for c in model.stream(Prompt("hey"))] == ["hey", "!"]
    chunks = [c async for c in model.stream(Prompt("x"))]
    assert len(chunks) == 1 and chunks[0].result.finish_reason == "STOP"
