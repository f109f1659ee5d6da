"""What a memory advisor stores and sends when the prompt already carries history (issue 17).

Spring AI's own cases, run in call and stream mode over the in-memory and the Django repository:

* a prompt carrying its own tool exchange (``[U, A(call), T]``) over an empty memory is stored
  whole, so the next turn sees it (Spring AI stores only the tool response, which the window then
  hides);
* a prompt carrying part of a history longer than the window reaches the model without
  duplicated messages and without a tool call separated from its response;
* a conversation opened by an assistant greeting keeps it while everything fits.
"""

from __future__ import annotations

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    AssistantMessage,
    ChatClient,
    ScriptedChatModel,
    ToolResponseMessage,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor, PromptChatMemoryAdvisor
from advisors_app.core.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory
from tests.core.advisors.memory_helpers import turn
from tests.core.memory.messages import A, S, T, U, call

ADVISORS = [MessageChatMemoryAdvisor, PromptChatMemoryAdvisor]


@pytest.fixture(params=["call", "stream"])
def mode(request):
    return request.param


@pytest.fixture(
    params=["in_memory", pytest.param("django", marks=pytest.mark.django_db(transaction=True))]
)
def repository(request):
    if request.param == "django":
        from advisors_app.stores.memory import DjangoChatMemoryRepository

        return DjangoChatMemoryRepository()
    return InMemoryChatMemoryRepository()


async def send(client, mode, *messages, conversation_id="c1"):
    """One turn whose prompt is exactly ``messages``."""
    spec = client.prompt().messages(*messages).advisor_param(CONVERSATION_ID, conversation_id)
    if mode == "call":
        return (await spec.acall()).content()
    return (await spec.stream().aggregate()).chat_response.text


def assert_well_formed(messages):
    """What providers accept: every tool call answered right after it, no orphan response."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolResponseMessage):
            answered = {r.id for r in message.responses}
            assert answered <= open_calls, f"tool response without its call: {message}"
            open_calls -= answered
            continue
        assert not open_calls, f"tool calls {open_calls} not answered before {message}"
        if isinstance(message, AssistantMessage):
            open_calls = {c.id for c in message.tool_calls}
    assert not open_calls, f"tool calls {open_calls} never answered"


def assert_no_duplicates(messages):
    assert len(set(messages)) == len(messages), f"duplicated messages: {messages}"


# -- a prompt carrying its own tool exchange -------------------------------------------------


@pytest.mark.parametrize("advisor_class", ADVISORS, ids=lambda c: c.__name__)
async def test_a_tool_exchange_in_the_prompt_is_stored_whole(repository, mode, advisor_class):
    memory = MessageWindowChatMemory(repository)
    model = ScriptedChatModel(["It is sunny.", "You asked about Oslo."])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    exchange = [U("Weather in Oslo?"), call("t1"), T("t1")]
    assert await send(client, mode, *exchange) == "It is sunny."
    assert await memory.aget("c1") == [*exchange, A("It is sunny.")]
    await turn(client, "What did I ask?", mode)
    second = model.prompts[1].instructions
    if advisor_class is MessageChatMemoryAdvisor:
        assert second == (*exchange, A("It is sunny."), U("What did I ask?"))
    else:
        assert "Weather in Oslo?" in second[0].text
        assert second[1:] == (U("What did I ask?"),)


async def test_the_stored_exchange_survives_a_small_window(repository, mode):
    # Storing only the tool response leaves a window that hides it: an empty conversation.
    memory = MessageWindowChatMemory(repository, max_messages=4)
    model = ScriptedChatModel(["It is sunny.", "Oslo."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    await send(client, mode, U("Weather in Oslo?"), call("t1"), T("t1"))
    await turn(client, "Which city?", mode)
    assert model.prompts[1].instructions == (
        U("Weather in Oslo?"),
        call("t1"),
        T("t1"),
        A("It is sunny."),
        U("Which city?"),
    )


async def test_only_what_memory_does_not_hold_is_stored(repository, mode):
    memory = MessageWindowChatMemory(repository)
    await memory.aadd("c1", [U("Weather in Oslo?"), call("t1")])
    model = ScriptedChatModel(["It is sunny."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    await send(client, mode, U("Weather in Oslo?"), call("t1"), T("t1"))
    assert model.prompts[0].instructions == (U("Weather in Oslo?"), call("t1"), T("t1"))
    assert await repository.afind_by_conversation_id("c1") == [
        U("Weather in Oslo?"),
        call("t1"),
        T("t1"),
        A("It is sunny."),
    ]


# -- a prompt carrying part of a history longer than the window -------------------------------


@pytest.mark.parametrize("max_messages", [1, 2, 3, 4, 5, 20])
async def test_part_of_a_longer_history_in_the_prompt_is_sent_once(repository, mode, max_messages):
    memory = MessageWindowChatMemory(repository, max_messages=max_messages)
    exchange = [U("Plan the trip"), call("c1"), T("c1"), call("c2"), T("c2")]
    await memory.aadd("c1", exchange[:4])
    model = ScriptedChatModel(["Booked."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    assert await send(client, mode, *exchange) == "Booked."
    sent = model.prompts[0].instructions
    assert_no_duplicates(sent)
    assert_well_formed(sent)
    assert sent == tuple(exchange)
    assert await repository.afind_by_conversation_id("c1") == [*exchange, A("Booked.")]


async def test_older_turns_outside_the_prompt_still_come_from_memory(repository, mode):
    memory = MessageWindowChatMemory(repository, max_messages=8)
    await memory.aadd("c1", [U("Hi"), A("Hello"), U("Plan the trip"), call("c1"), T("c1")])
    model = ScriptedChatModel(["Booked."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    await send(client, mode, S("Be brief."), call("c1"), T("c1"), call("c2"), T("c2"))
    sent = model.prompts[0].instructions
    assert sent == (
        S("Be brief."),
        U("Hi"),
        A("Hello"),
        U("Plan the trip"),
        call("c1"),
        T("c1"),
        call("c2"),
        T("c2"),
    )
    assert_well_formed(sent[1:])


@pytest.mark.parametrize("max_messages", [1, 2, 20])
async def test_a_response_to_a_call_the_window_left_out_brings_the_call_back(
    repository, mode, max_messages
):
    # A caller that runs the tools itself sends only the results of the stored call.
    memory = MessageWindowChatMemory(repository, max_messages=max_messages)
    await memory.aadd("c1", [U("Hi"), A("Hello"), U("Weather in Oslo?"), call("t1")])
    model = ScriptedChatModel(["It is sunny."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    await send(client, mode, T("t1"))
    sent = model.prompts[0].instructions
    assert_well_formed(sent)
    assert sent[-3:] == (U("Weather in Oslo?"), call("t1"), T("t1"))
    assert await repository.afind_by_conversation_id("c1") == [
        U("Hi"),
        A("Hello"),
        U("Weather in Oslo?"),
        call("t1"),
        T("t1"),
        A("It is sunny."),
    ]


# -- a conversation opened by an assistant greeting -------------------------------------------


@pytest.mark.parametrize("advisor_class", ADVISORS, ids=lambda c: c.__name__)
async def test_a_greeting_is_kept_while_everything_fits(repository, mode, advisor_class):
    memory = MessageWindowChatMemory(repository)
    model = ScriptedChatModel(["Hello Ann.", "Ann."])
    client = ChatClient(model, default_advisors=[advisor_class(memory)])
    greeting = A("Welcome! What is your name?")
    await send(client, mode, greeting, U("Ann"))
    assert await memory.aget("c1") == [greeting, U("Ann"), A("Hello Ann.")]
    await turn(client, "What is my name?", mode)
    second = model.prompts[1].instructions
    if advisor_class is MessageChatMemoryAdvisor:
        assert second == (greeting, U("Ann"), A("Hello Ann."), U("What is my name?"))
    else:
        assert greeting.text in second[0].text


async def test_a_greeting_goes_once_the_window_trims(repository, mode):
    memory = MessageWindowChatMemory(repository, max_messages=3)
    await memory.aadd("c1", [A("Welcome!"), U("Hi"), A("Hello")])
    assert await memory.aget("c1") == [A("Welcome!"), U("Hi"), A("Hello")]
    model = ScriptedChatModel(["Fine."])
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory)])
    await turn(client, "How are you?", mode)
    assert model.prompts[0].instructions == (A("Welcome!"), U("Hi"), A("Hello"), U("How are you?"))
    # Five messages do not fit in three: trimming starts the window at a user message.
    assert await memory.aget("c1") == [U("How are you?"), A("Fine.")]
