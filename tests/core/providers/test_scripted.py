"""ScriptedChatModel's tool rules: stateless tool calls from a JSON config, call = stream."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from advisors_app.core.messages import (
    AssistantMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.prompt import ChatOptions, Prompt, ToolCallingChatOptions
from advisors_app.core.providers.registry import create_chat_model, validate_model_config
from advisors_app.core.providers.scripted import ScriptedChatModel, ToolRule, parse_tool_rules
from advisors_app.core.response import ChatResponse
from advisors_app.core.tools import tool


@tool(name="save_note")
def save_note_tool(text: str) -> str:
    return text


@tool(name="list_notes")
def list_notes_tool() -> str:
    return ""


CONFIG: dict[str, Any] = {
    "provider": "scripted",
    "responses": ["I only take notes."],
    "tool_rules": [
        {
            # missing_group never takes part: it is filled in as "".
            "when": r"^save a note:\s*(?P<text>.+)|(?P<missing_group>never)",
            "tool": "save_note",
            "arguments": {"text": "{text}", "tags": ["{missing_group}", "demo"], "n": 1},
        },
        {"when": r"\blist\b", "tool": "list_notes"},
        {"when": "note", "tool": "save_note", "arguments": {"text": "{message}"}},
    ],
    "after_tool": "Done. {tool_result}",
}
OFFERED = ToolCallingChatOptions(tool_callbacks=(save_note_tool, list_notes_tool))


def model(**changes: Any) -> Any:
    return create_chat_model({**CONFIG, **changes})


async def both(chat_model: Any, prompt: Prompt) -> tuple[ChatResponse, list[ChatResponse]]:
    """The call's response and the stream's chunks for the same prompt."""
    return await chat_model.call(prompt), [c async for c in chat_model.stream(prompt)]


def only_call(response: ChatResponse) -> ToolCall:
    [call] = response.result.output.tool_calls
    return call


async def test_a_matching_message_calls_the_offered_tool_in_call_and_stream() -> None:
    response, chunks = await both(model(), Prompt("Save a note: buy milk", OFFERED))
    assert len(chunks) == 1  # the tool call is one chunk
    for reply in (response, chunks[0]):
        call = only_call(reply)
        assert call.name == "save_note" and re.fullmatch(r"call_[0-9a-f]{24}", call.id)
        assert json.loads(call.arguments) == {"text": "buy milk", "tags": ["", "demo"], "n": 1}
        assert reply.result.metadata.finish_reason == "TOOL_CALLS"
        assert reply.result.output.text == ""
    assert only_call(response).id != only_call(chunks[0]).id  # a fresh id per answer


async def test_rules_are_tried_in_order_and_are_case_insensitive() -> None:
    listed = await model().call(Prompt("LIST the notes please", OFFERED))
    assert only_call(listed).name == "list_notes" and only_call(listed).arguments == "{}"
    whole = await model().call(Prompt("A NOTE: the user's {text} stays as typed", OFFERED))
    assert json.loads(only_call(whole).arguments) == {
        "text": "A NOTE: the user's {text} stays as typed"
    }


async def test_no_match_answers_from_the_script() -> None:
    response, chunks = await both(model(), Prompt("Hello there", OFFERED))
    assert response.text == "I only take notes." and not response.result.output.tool_calls
    assert [c.text for c in chunks] == ["I only take notes."]
    assert chunks[0].result.metadata.finish_reason == "STOP"


@pytest.mark.parametrize(
    "options",
    [
        None,
        ChatOptions(temperature=0.1),
        ToolCallingChatOptions(tool_callbacks=(list_notes_tool,)),
    ],
)
async def test_a_tool_that_is_not_offered_is_never_called(options: ChatOptions | None) -> None:
    response, chunks = await both(model(), Prompt("save a note: buy milk", options))
    assert response.text == "I only take notes." and not response.result.output.tool_calls
    assert not chunks[0].result.output.tool_calls


async def test_tools_offered_by_name_or_by_the_default_options_count() -> None:
    by_name = await model().call(
        Prompt("Save a note: x", ToolCallingChatOptions(tool_names=("save_note",)))
    )
    assert only_call(by_name).name == "save_note"
    defaults = ScriptedChatModel(
        ["no"],
        default_options=OFFERED,
        tool_rules=CONFIG["tool_rules"],
        after_tool=CONFIG["after_tool"],
    )
    assert only_call(await defaults.call(Prompt("Save a note: x"))).name == "save_note"


def round_of(result: str, *, user: str = "Save a note: buy milk") -> Prompt:
    call = ToolCall("call_1", "save_note", '{"text": "buy milk"}')
    return Prompt(
        [
            UserMessage(user),
            AssistantMessage("", tool_calls=(call,)),
            ToolResponseMessage((ToolResponse("call_1", "save_note", result),)),
        ],
        OFFERED,
    )


async def test_after_a_tool_round_the_answer_quotes_the_tool_result() -> None:
    response, chunks = await both(model(), round_of("Saved note #7: buy milk"))
    assert response.text == "Done. Saved note #7: buy milk"
    assert [c.text for c in chunks] == ["Done. Saved note #7: buy milk"]
    assert response.result.metadata.finish_reason == "STOP"
    rejection = "The user rejected the call to tool 'save_note'; it was not executed."
    assert (await model().call(round_of(rejection))).text == f"Done. {rejection}"
    named = model(after_tool="{tool_name} said {tool_result} to {message}")
    assert (await named.call(round_of("ok", user="note it"))).text == "save_note said ok to note it"


async def test_without_after_tool_a_tool_round_is_answered_from_the_script() -> None:
    config = {k: v for k, v in CONFIG.items() if k != "after_tool"}
    answer = await create_chat_model(config).call(round_of("Saved note #7: buy milk"))
    assert answer.text == "I only take notes."  # never the same call again (no loop)


async def test_the_answer_depends_only_on_the_prompt() -> None:
    """A new model (a restart) answers a resumed prompt as the first one would."""
    prompts = [round_of("ok"), Prompt("Save a note: a", OFFERED), Prompt("hi", OFFERED)]
    first, second = model(), model()
    for prompt in prompts:
        a, b = await first.call(prompt), await second.call(prompt)
        assert a.text == b.text
        assert [(c.name, c.arguments) for c in a.result.output.tool_calls] == [
            (c.name, c.arguments) for c in b.result.output.tool_calls
        ]
    assert len(first.prompts) == 3


async def test_rules_only_answer_a_prompt_that_ends_with_a_user_message() -> None:
    ends_with_answer = Prompt(
        [UserMessage("Save a note: x"), AssistantMessage("earlier answer")], OFFERED
    )
    assert (await model().call(ends_with_answer)).text == "I only take notes."


def test_a_config_with_rules_is_json_and_its_rules_compile() -> None:
    assert json.loads(json.dumps(CONFIG)) == CONFIG
    validate_model_config(CONFIG, "chat", "notes")
    rules = parse_tool_rules(CONFIG["tool_rules"])
    assert [r.tool for r in rules] == ["save_note", "list_notes", "save_note"]
    assert isinstance(rules[0], ToolRule) and rules[0].when.flags & re.IGNORECASE
    assert rules[1].arguments_for("nothing here") is None


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"tool_rules": {"when": "x"}}, "'tool_rules' must be list"),
        ({"tool_rules": ["save_note"]}, "'tool_rules'[0] must be an object"),
        ({"tool_rules": [{"when": "x", "tool": "t", "if": 1}]}, "'tool_rules'[0] has unknown"),
        ({"tool_rules": [{"tool": "t"}]}, "'tool_rules'[0]: 'when' must be a non-empty"),
        ({"tool_rules": [{"when": "", "tool": "t"}]}, "'when' must be a non-empty"),
        ({"tool_rules": [{"when": "(", "tool": "t"}]}, "not a valid regular expression"),
        ({"tool_rules": [{"when": "x", "tool": " "}]}, "'tool_rules'[0]: 'tool' must name"),
        ({"tool_rules": [{"when": "x", "tool": "t", "arguments": []}]}, "must be a JSON object"),
        (
            {"tool_rules": [{"when": "x", "tool": "t", "arguments": {"a": "{nope}"}}]},
            "unknown placeholder(s) {nope}",
        ),
        ({"after_tool": 3}, "'after_tool' must be str"),
        ({"after_tool": "Done {result}"}, "'after_tool' has unknown placeholder(s) {result}"),
    ],
)
def test_bad_rules_are_refused_with_the_rule_and_key_named(
    changes: dict[str, Any], fragment: str
) -> None:
    config = {**CONFIG, **changes}
    with pytest.raises(ValueError) as raised:
        validate_model_config(config, "chat", "notes")
    assert fragment in str(raised.value) and "chat model 'notes'" in str(raised.value)
    with pytest.raises(ValueError):
        create_chat_model(config)


def test_the_constructor_checks_rules_too() -> None:
    with pytest.raises(ValueError, match="not a valid regular expression"):
        ScriptedChatModel(["x"], tool_rules=[{"when": "[", "tool": "t"}])
    with pytest.raises(ValueError, match="unknown placeholder"):
        ScriptedChatModel(["x"], after_tool="{nope}")
