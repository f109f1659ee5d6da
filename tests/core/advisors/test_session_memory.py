"""Session memory (issue 20): SessionTurnAdvisor outside the tool loop, SessionMemoryAdvisor inside.

The turn is stored whole, in one append, after the call; tool calls with their results; the
summary of a compaction and the last turns verbatim reach the next prompt; nothing is stored
for a failed call; an interrupted stream's partial reply is flagged.
"""

from __future__ import annotations

from contextlib import aclosing

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    AssistantMessage,
    ChatClient,
    ScriptedChatModel,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.advisors import session_advisors
from advisors_app.core.advisors.session_memory import SUMMARY_HEADER, SessionMemoryAdvisor
from advisors_app.core.exceptions import ProviderError
from advisors_app.core.memory import (
    CompactionPolicy,
    InMemorySessionRepository,
    KeyFactsCompactionStrategy,
    RecursiveSummarizationCompactionStrategy,
    TurnCountTrigger,
    WindowCompactionStrategy,
)
from advisors_app.core.memory.ids import INTERRUPTED
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tokens import TiktokenTokenCountEstimator
from advisors_app.core.tools import tool
from tests.core.advisors.memory_helpers import turn

MODES = ["call", "stream"]


@tool
def clock() -> str:
    """The time."""
    return "noon"


@tool(return_direct=True)
def ticket() -> str:
    """Open a ticket."""
    return "ticket #7 opened"


class CountingSessions(InMemorySessionRepository):
    def __init__(self) -> None:
        super().__init__()
        self.appends: list[list] = []

    async def aappend(self, conversation_id, messages):
        self.appends.append(list(messages))
        await super().aappend(conversation_id, messages)


def client(model, repository, policy=None, tools=(clock,), system=None, **options):
    advisors = session_advisors(repository, policy, **options)
    return ChatClient(
        model, default_advisors=list(advisors), default_tools=list(tools), default_system=system
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_tool_turn_is_stored_whole_in_one_append_and_replayed(mode):
    repository = CountingSessions()
    model = ScriptedChatModel([tool_call_response(("clock", {})), "It is noon.", "You asked."])
    chat = client(model, repository)
    assert await turn(chat, "What time is it?", mode) == "It is noon."
    log = repository.log("c1")
    assert [type(m).__name__ for m in log] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResponseMessage",
        "AssistantMessage",
    ]
    assert log[1].tool_calls[0].id == log[2].responses[0].id
    assert len(repository.appends) == 1
    # The second round saw the call and its result once (the loop sends only the results).
    assert model.prompts[1].instructions == tuple(log[:3])
    await turn(chat, "What did I ask?", mode)
    assert model.prompts[2].instructions == (*log, UserMessage("What did I ask?"))


@pytest.mark.parametrize("mode", MODES)
async def test_a_failed_call_stores_nothing(mode):
    repository = CountingSessions()
    model = ScriptedChatModel([tool_call_response(("clock", {})), ProviderError("down")])
    with pytest.raises(ProviderError):
        await turn(client(model, repository), "What time is it?", mode)
    assert repository.log("c1") == [] and repository.appends == []


async def test_an_interrupted_stream_stores_the_partial_reply_flagged():
    repository = CountingSessions()
    model = ScriptedChatModel([["It is ", "no", ProviderError("broken")]])
    spec = client(model, repository, tools=()).prompt().user("Time?")
    spec.advisor_param(CONVERSATION_ID, "c1")
    received = []
    with pytest.raises(ProviderError):
        async with aclosing(spec.stream().content()) as deltas:
            async for delta in deltas:
                received.append(delta)
    log = repository.log("c1")
    assert log[0] == UserMessage("Time?")
    assert log[1].text == "It is no" and log[1].metadata[INTERRUPTED] is True


@pytest.mark.parametrize("mode", MODES)
async def test_return_direct_results_are_stored_by_the_turn_advisor(mode):
    repository = CountingSessions()
    model = ScriptedChatModel([tool_call_response(("ticket", {})), "Anything else?"])
    chat = client(model, repository, tools=(ticket,))
    assert await turn(chat, "Open a ticket", mode) == "ticket #7 opened"
    log = repository.log("c1")
    assert isinstance(log[2], ToolResponseMessage)
    assert log[2].responses[0].response_data == "ticket #7 opened"
    assert log[3] == AssistantMessage("ticket #7 opened")
    await turn(chat, "Thanks", mode)
    assert model.prompts[1].instructions == (*log, UserMessage("Thanks"))


@pytest.mark.parametrize("mode", MODES)
async def test_summary_and_last_turns_verbatim_reach_the_next_prompt(mode):
    repository = InMemorySessionRepository()
    summarizer = ScriptedChatModel(["The user is Ada; she likes tea."])
    policy = CompactionPolicy(
        TurnCountTrigger(2), RecursiveSummarizationCompactionStrategy(summarizer, last_turns=1)
    )
    model = ScriptedChatModel(["Hi Ada.", "Tea, noted.", "Sure.", "Ada."], repeat=False)
    chat = client(model, repository, policy, tools=(), system="Be brief.")
    await turn(chat, "I am Ada", mode)
    await turn(chat, "I like tea", mode)
    assert repository.boundaries("c1") == []
    await turn(chat, "Tell me more", mode)  # three turns > 2: compacted after this turn
    (boundary,) = repository.boundaries("c1")
    assert boundary.covers_up_to == 4 and boundary.summary == "The user is Ada; she likes tea."
    assert "I am Ada" in summarizer.prompts[0].instructions[0].text
    await turn(chat, "Who am I?", mode)
    assert model.prompts[3].instructions == (
        SystemMessage(f"Be brief.\n\n{SUMMARY_HEADER}\nThe user is Ada; she likes tea."),
        UserMessage("Tell me more"),
        AssistantMessage("Sure."),
        UserMessage("Who am I?"),
    )
    assert len(repository.log("c1")) == 8  # the log is complete


@pytest.mark.parametrize("mode", MODES)
async def test_a_summary_placed_in_the_user_message_leaves_the_log_as_typed(mode):
    repository = InMemorySessionRepository()
    policy = CompactionPolicy(TurnCountTrigger(2), KeyFactsCompactionStrategy(last_turns=1))
    model = ScriptedChatModel(["Hi Ada.", "Ok.", "Sure.", "X7-4431."], repeat=False)
    chat = client(model, repository, policy, tools=(), system="Be brief.", summary_placement="user")
    for text in ("My project code is X7-4431.", "What is a set?", "Tell me more"):
        await turn(chat, text, mode)
    facts = f"{SUMMARY_HEADER}\nFacts the user stated earlier in this conversation:\n"
    facts += "- My project code is X7-4431."
    await turn(chat, "What is my project code?", mode)
    assert model.prompts[3].instructions == (
        SystemMessage("Be brief."),
        UserMessage("Tell me more"),
        AssistantMessage("Sure."),
        UserMessage(f"{facts}\n\nWhat is my project code?"),
    )
    assert repository.log("c1")[-2] == UserMessage("What is my project code?")
    with pytest.raises(ValueError, match="summary_placement"):
        SessionMemoryAdvisor(repository, summary_placement="middle")


async def test_inline_compaction_when_the_next_turn_would_not_fit():
    repository = InMemorySessionRepository()
    policy = CompactionPolicy(TurnCountTrigger(100), WindowCompactionStrategy(last_turns=2))
    model = ScriptedChatModel(["ok"], repeat=True)
    chat = client(model, repository, policy, tools=(), context_window=1000, reserve_tokens=100)
    for n in range(10):
        await turn(chat, f"message {n} " + "word " * 100, "call")
    # Older turns left the view before a prompt would pass 3/4 of the window minus the reply.
    estimator = TiktokenTokenCountEstimator()
    sizes = [estimator.estimate(list(p.instructions)) for p in model.prompts]
    assert max(sizes) <= 750 - 100 < estimator.estimate([UserMessage("word " * 100)]) * 7
    assert len(repository.boundaries("c1")) >= 2
    assert len(repository.log("c1")) == 20


async def test_a_request_that_cannot_fit_at_all_is_not_a_reason_to_compact():
    repository = InMemorySessionRepository()
    policy = CompactionPolicy(TurnCountTrigger(100), WindowCompactionStrategy(last_turns=1))
    model = ScriptedChatModel(["ok"], repeat=True)
    chat = client(model, repository, policy, tools=(), context_window=1000, reserve_tokens=100)
    for n in range(4):
        await turn(chat, f"message {n} " + "word " * 60, "call")
    # A message larger than the whole window: compacting cannot make it fit, so the history
    # is left as it is (the model's budget check, when there is one, refuses the turn).
    await turn(chat, "word " * 2000, "call")
    assert repository.boundaries("c1") == []
