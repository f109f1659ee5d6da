"""Recall: the ``conversation_search`` tool on the real database, alone and in a chain's turn.

The tool reads the turn's user and conversation from its tool context; the first tests pass
that context directly, the last ones let the turn service and the tool loop put it there (with
a 2.0 memory window, then with session memory after a compaction).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core import ScriptedChatModel
from advisors_app.core.attributes import CONVERSATION_ID, PRINCIPAL
from advisors_app.core.messages import (
    AssistantMessage,
    SystemMessage,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import ToolArgumentsError, ToolRegistry
from advisors_app.definition.runtime import load_chain
from advisors_app.definition.tools import tool_registry
from advisors_app.memory.recall import (
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    ConversationSearchError,
    conversation_search,
    register_recall_tools,
    search_conversation,
)
from advisors_app.models import Conversation, ConversationBoundary
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.turn import call_turn
from tests.factories import make_chain, scripted_model
from tests.task_worker import run_queued_tasks

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache"),
]

repository = DjangoChatMemoryRepository()

FACT = "By the way, my passport number is X7-4431 and I fly to Lisbon on May 3."
TURNS = 40


def filler(n: int) -> tuple[str, str]:
    return (f"Tell me something about topic {n}.", f"Topic {n} is about gardening and weather.")


def long_conversation(user: Any, public_id: str = "trip") -> str:
    """A stored conversation of :data:`TURNS` turns of ``user`` whose turn 2 states
    :data:`FACT`; its key."""
    key = f"{user.pk}:{public_id}"
    Conversation.objects.create(conversation_id=key, owner=user, title="Trip")
    messages: list[Any] = []
    for n in range(1, TURNS + 1):
        question, answer = filler(n)
        if n == 2:
            question, answer = FACT, "Noted: passport X7-4431, Lisbon on May 3."
        messages += [UserMessage(question), AssistantMessage(answer)]
    repository.append(key, messages)
    return key


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


async def search(user: Any, key: str | None, **arguments: Any) -> str:
    context = {PRINCIPAL: user, CONVERSATION_ID: key}
    return await conversation_search.call(json.dumps(arguments), context)


def test_the_tool_is_registered_by_name_with_its_limits_in_the_schema() -> None:
    assert tool_registry.get("conversation_search") is conversation_search
    registry = ToolRegistry()
    register_recall_tools(registry)
    register_recall_tools(registry)  # idempotent
    assert registry.names == ("conversation_search",)
    schema = conversation_search.definition.input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["maxLength"] == MAX_QUERY_CHARS
    limit = schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, MAX_LIMIT, 5)
    assert conversation_search.requires_approval_for({"query": "x"}) is False


async def test_a_fact_from_an_early_turn_of_a_long_conversation_is_found_first(
    alice: Any,
) -> None:
    key = await sync_to_async(long_conversation)(alice)
    answer = await search(alice, key, query="what was my passport number")
    head, first = answer.splitlines()
    assert head == (
        "1 message of this conversation matches 'what was my passport number', best first:"
    )
    # Turn 2's user message is sequence 3.
    assert first.startswith("[#3 user, ") and " UTC] " in first
    assert "my **passport** **number** is X7-4431" in first
    # A word no message holds: any of the words will do, the message with more of them first.
    answer = await search(alice, key, query="passport number expiry")
    head, first, second = answer.splitlines()
    assert head.startswith("2 messages of this conversation match")
    assert first.startswith("[#3 user, ") and "my **passport** **number** is" in first
    assert second.startswith("[#4 assistant, ") and "Noted: **passport** X7-4431" in second


async def test_the_limit_caps_the_hits_and_ties_come_newest_first(alice: Any) -> None:
    key = await sync_to_async(long_conversation)(alice)
    lines = (await search(alice, key, query="gardening", limit=3)).splitlines()[1:]
    assert [line.split(" ", 1)[0] for line in lines] == ["[#80", "[#78", "[#76"]
    with pytest.raises(ToolArgumentsError, match="limit"):
        await search(alice, key, query="gardening", limit=MAX_LIMIT + 1)
    with pytest.raises(ToolArgumentsError, match="limit"):
        await search(alice, key, query="gardening", limit=0)


async def test_another_users_conversation_is_refused_without_data(alice: Any, bob: Any) -> None:
    key = await sync_to_async(long_conversation)(alice)
    with pytest.raises(ConversationSearchError, match="own user") as refused:
        await search(bob, key, query="passport")
    assert "X7-4431" not in str(refused.value) and "Trip" not in str(refused.value)


@pytest.mark.parametrize(
    "context",
    [None, {}, {CONVERSATION_ID: "1:trip"}, {PRINCIPAL: None, CONVERSATION_ID: "1:trip"}],
)
async def test_without_a_user_the_tool_refuses(context: Any) -> None:
    with pytest.raises(ConversationSearchError, match="no user to act for"):
        await conversation_search.call('{"query": "passport"}', context)


async def test_without_a_conversation_the_tool_refuses(alice: Any) -> None:
    from django.contrib.auth.models import AnonymousUser

    with pytest.raises(ConversationSearchError, match="no conversation to search"):
        await search(alice, None, query="passport")
    with pytest.raises(ConversationSearchError, match="no user"):
        await search(AnonymousUser(), "1:trip", query="passport")


async def test_blank_and_over_long_queries_are_refused(alice: Any) -> None:
    key = await sync_to_async(long_conversation)(alice)
    with pytest.raises(ValueError, match="blank"):
        await search(alice, key, query="   ")
    with pytest.raises(ToolArgumentsError, match="query"):
        await search(alice, key, query="x" * (MAX_QUERY_CHARS + 1))
    with pytest.raises(ToolArgumentsError, match="query"):
        await search(alice, key)


async def test_a_conversation_not_stored_yet_has_no_hits(alice: Any) -> None:
    answer = await search(alice, f"{alice.pk}:new", query="passport")
    assert answer == "No message of this conversation matches 'passport'."


def test_tool_responses_and_system_messages_are_not_searched(alice: Any) -> None:
    key = f"{alice.pk}:tools"
    row = Conversation.objects.create(conversation_id=key, owner=alice)
    repository.append(
        key,
        [
            SystemMessage("You know the zebra codeword."),
            UserMessage("Look it up."),
            ToolResponseMessage((ToolResponse("c1", "lookup", "zebra zebra zebra"),)),
            AssistantMessage("The zebra is striped."),
        ],
    )
    [hit] = search_conversation(row.pk, "zebra")
    assert (hit.sequence, hit.role, hit.snippet) == (4, "assistant", "The **zebra** is striped.")
    assert hit.rank > 0


def test_websearch_syntax_and_the_substring_fallback(alice: Any) -> None:
    key = long_conversation(alice)
    pk = Conversation.objects.get(conversation_id=key).pk
    assert [h.sequence for h in search_conversation(pk, '"passport number"')] == [3]
    assert [h.sequence for h in search_conversation(pk, "lisbon -passport")] == []
    assert [h.sequence for h in search_conversation(pk, "lisbon -noted")] == [3]
    either = search_conversation(pk, "topic 7 or topic 9", limit=10)
    assert sorted(h.sequence for h in either) == [13, 14, 17, 18]
    # Full-text search knows whole words only: a part of a code is found as a substring.
    partial = search_conversation(pk, "7-44")
    assert [(h.sequence, h.rank) for h in partial] == [(4, 0.0), (3, 0.0)]  # newest first
    assert partial[1].snippet == (
        "By the way, my passport number is X**7-44**31 and I fly to Lisbon on May 3."
    )
    # A code full-text search splits into parts is marked as one, not **X7****-4431**.
    code = search_conversation(pk, "X7-4431")
    assert sorted(h.sequence for h in code) == [3, 4]
    assert all("**X7-4431**" in h.snippet and "****" not in h.snippet for h in code)
    # Search syntax is never taken literally.
    assert search_conversation(pk, '"7-44"') == []


def test_snippets_are_one_clipped_line(alice: Any) -> None:
    key = f"{alice.pk}:long"
    row = Conversation.objects.create(conversation_id=key, owner=alice)
    words = " ".join(f"word{n}" for n in range(400))
    repository.append(key, [UserMessage(f"{words}\n\nthe needle here\n{words}")])
    [hit] = search_conversation(row.pk, "needle")
    assert "**needle**" in hit.snippet and "\n" not in hit.snippet
    assert len(hit.snippet) <= 240
    [literal] = search_conversation(row.pk, "edle he")
    assert "**edle he**" in literal.snippet and len(literal.snippet) <= 240
    assert literal.snippet.startswith("…") and literal.snippet.endswith("…")


# -- in a chain's turn --------------------------------------------------------------------------


def recall_chain() -> ScriptedChatModel:
    """A chain ``recall`` with a 20-message window, the tool loop and ``conversation_search``;
    its scripted model."""
    make_chain(
        "recall",
        model=scripted_model("recall-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 20}), ("tool_calling", {})),
        tools=["conversation_search"],
    )
    model: ScriptedChatModel = load_chain("recall").client.chat_model  # type: ignore[assignment]
    return model


async def test_a_chain_calls_the_tool_and_the_next_prompt_holds_the_hit(alice: Any) -> None:
    await sync_to_async(long_conversation)(alice)
    model = await sync_to_async(recall_chain)()
    model.add(
        tool_call_response(("conversation_search", {"query": "passport number"})),
        "Your passport number is X7-4431.",
    )
    outcome = await call_turn("recall", alice, "What was my passport number?", "trip")
    assert outcome.content == "Your passport number is X7-4431."
    assert [t["name"] for t in outcome.tools] == ["conversation_search"]
    assert all(t["ok"] for t in outcome.tools)

    first, second = model.prompts
    # The window left turn 2 out of the first prompt; the search brought it back.
    assert "X7-4431" not in " ".join(m.text for m in first.instructions)
    [answer] = [m for m in second.instructions if isinstance(m, ToolResponseMessage)]
    [response] = answer.responses
    assert response.name == "conversation_search"
    assert response.response_data.splitlines()[1].startswith("[#3 user, ")
    assert "my **passport** **number** is X7-4431" in response.response_data


async def test_in_a_chain_another_users_key_never_reaches_the_tool(alice: Any, bob: Any) -> None:
    # Bob names Alice's public id: the turn service keys it by Bob, so the tool searches Bob's
    # (new, empty) conversation and finds nothing of Alice's.
    await sync_to_async(long_conversation)(alice)
    model = await sync_to_async(recall_chain)()
    model.add(tool_call_response(("conversation_search", {"query": "passport"})), "Nothing.")
    await call_turn("recall", bob, "What was my passport number?", "trip")
    [answer] = [m for m in model.prompts[1].instructions if isinstance(m, ToolResponseMessage)]
    assert answer.responses[0].response_data == (
        "No message of this conversation matches 'passport'."
    )


# -- after a compaction (session memory) --------------------------------------------------------

SUMMARY = "The user chatted about gardening topics."


def session_recall_chain() -> ScriptedChatModel:
    """A chain ``session-recall``: session memory summarizing (a scripted summary) after more
    than three turns, keeping the last one verbatim, the tool loop and ``conversation_search``;
    its scripted model."""
    scripted_model("summarizer", responses=(SUMMARY,))
    policy = {
        "trigger": {"kind": "turns", "threshold": 3},
        "strategy": "summarize",
        "keep_last_turns": 1,
        "summary_model": "summarizer",
    }
    make_chain(
        "session-recall",
        model=scripted_model("session-recall-model", responses=(), repeat=False),
        advisors=(("session_memory", policy), ("tool_calling", {})),
        tools=["conversation_search"],
    )
    chain = load_chain("session-recall")
    model: ScriptedChatModel = chain.client.chat_model  # type: ignore[assignment]
    return model


def prompt_text(prompt: Any) -> str:
    return " ".join(m.text for m in prompt.instructions)


async def test_the_tool_finds_a_fact_that_compaction_folded_away(alice: Any, bob: Any) -> None:
    model = await sync_to_async(session_recall_chain)()
    model.add("Noted: passport X7-4431, Lisbon on May 3.")
    outcome = await call_turn("session-recall", alice, FACT, "trip")
    for n in range(1, 4):
        model.add(filler(n)[1])
        await call_turn("session-recall", alice, filler(n)[0], outcome.conversation_id)
    # The fourth turn queued the compaction; a worker folds turns 1-3 into the summary.
    assert await sync_to_async(run_queued_tasks)() == 1
    boundary = await ConversationBoundary.objects.aget()
    assert (boundary.covers_up_to, boundary.summary) == (6, SUMMARY)

    model.add(
        tool_call_response(("conversation_search", {"query": "passport number"})),
        "Your passport number is X7-4431.",
    )
    answer = await call_turn("session-recall", alice, "What was my passport number?", "trip")
    assert answer.content == "Your passport number is X7-4431."
    asked, told = model.prompts[-2:]
    # The fact left the prompt: the summary and the last turn stand in for turns 1-3 ...
    assert SUMMARY in prompt_text(asked) and filler(3)[0] in prompt_text(asked)
    assert "X7-4431" not in prompt_text(asked) and FACT not in prompt_text(asked)
    # ... but the stored log still has it, and the tool brings it back.
    [found] = [m for m in told.instructions if isinstance(m, ToolResponseMessage)]
    assert found.responses[0].response_data.splitlines()[1].startswith("[#1 user, ")
    assert "my **passport** **number** is X7-4431" in found.responses[0].response_data

    # Owner-scoped: Bob's "trip" is his own (empty) conversation, and Alice's key is refused.
    model.add(tool_call_response(("conversation_search", {"query": "passport"})), "Nothing.")
    await call_turn("session-recall", bob, "What was my passport number?", "trip")
    [theirs] = [m for m in model.prompts[-1].instructions if isinstance(m, ToolResponseMessage)]
    assert theirs.responses[0].response_data == (
        "No message of this conversation matches 'passport'."
    )
    with pytest.raises(ConversationSearchError, match="own user"):
        await search(bob, f"{alice.pk}:trip", query="passport")
