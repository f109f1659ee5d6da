"""The session log, its view, turn boundaries and compaction (issue 20; Spring AI 2.1 session)."""

from __future__ import annotations

import pytest

from advisors_app.core import ScriptedChatModel, ToolResponse, ToolResponseMessage
from advisors_app.core.memory import (
    Boundary,
    InMemorySessionRepository,
    MessageCountTrigger,
    RecursiveSummarizationCompactionStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
    WindowCompactionStrategy,
    compact_session,
    turn_starts,
)
from tests.core.memory.messages import A, T, U, call

TOOL_TURN = [U("weather?"), call("t1"), T("t1"), A("sunny")]


def test_turns_start_at_user_messages_and_never_split_a_call_from_its_response():
    messages = [A("hello"), *TOOL_TURN, U("and tomorrow?"), A("rain")]
    assert turn_starts(messages) == [1, 5]
    # A user message between a call and its (late) response is not a turn start.
    late = [U("q"), call("t9"), U("meanwhile"), T("t9"), A("done"), U("next")]
    assert turn_starts(late) == [0, 5]


async def test_compaction_appends_a_boundary_on_a_turn_boundary_and_keeps_the_log():
    repository = InMemorySessionRepository()
    log = [*TOOL_TURN, U("two"), A("2"), *TOOL_TURN, U("four"), A("4")]
    await repository.aappend("c", log)
    result = await compact_session(
        repository, "c", TurnCountTrigger(3), WindowCompactionStrategy(last_turns=2)
    )
    assert result.boundary is not None and result.boundary.covers_up_to == 6
    assert repository.log("c") == log
    view = await repository.aload_view("c")
    assert view.messages == tuple(log[6:]) and view.positions == tuple(range(7, 13))
    # Never a cut between a call and its response: the view starts at a user message.
    assert view.messages[0] == U("weather?")


async def test_an_untriggered_or_raced_compaction_writes_nothing():
    repository = InMemorySessionRepository()
    await repository.aappend("c", [U("a"), A("1"), U("b"), A("2")])
    strategy = WindowCompactionStrategy(last_turns=1)
    assert (await compact_session(repository, "c", TurnCountTrigger(5), strategy)).unchanged
    assert not await repository.aappend_boundary("c", Boundary(2), after=7)
    assert repository.boundaries("c") == []
    with pytest.raises(ValueError, match="past the end"):
        await repository.aappend_boundary("c", Boundary(9), after=0)


async def test_recursive_summary_covers_the_previous_summary_and_the_new_turns():
    repository = InMemorySessionRepository()
    await repository.aappend("c", [U("I am Ada"), A("hi"), U("I like tea"), A("ok")])
    model = ScriptedChatModel(["S1", "S2"])
    strategy = RecursiveSummarizationCompactionStrategy(model, last_turns=1, model_name="m")
    first = await compact_session(repository, "c", MessageCountTrigger(1), strategy)
    assert first.summary == "S1" and first.boundary.model == "m"
    await repository.aappend("c", [U("I live in Oslo"), A("nice")])
    await compact_session(repository, "c", MessageCountTrigger(1), strategy)
    text = model.prompts[1].instructions[0].text
    assert "S1" in text and "I like tea" in text and "I am Ada" not in text
    view = await repository.aload_view("c")
    assert view.summary == "S2" and view.messages == (U("I live in Oslo"), A("nice"))


async def test_token_trigger_counts_the_view_against_a_share_of_the_window():
    repository = InMemorySessionRepository()
    await repository.aappend("c", [U("word " * 300), A("ok")])
    view = await repository.aload_view("c")
    assert TokenCountTrigger.share_of(1000, 0.25).should_compact(view)
    assert not TokenCountTrigger.share_of(1000, 0.5).should_compact(view)


def test_tool_responses_answer_calls_across_messages():
    parallel = [U("q"), call("a", "b"), T("a"), ToolResponseMessage([ToolResponse("b", "x", "")])]
    assert turn_starts([*parallel, A("done"), U("n")]) == [0, 5]
