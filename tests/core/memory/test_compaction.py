"""The key-facts compaction strategy (issue 20): the facts the user stated, kept verbatim by
rules, replace the compacted turns; merged with the previous boundary's list and capped."""

from __future__ import annotations

import pytest

from advisors_app.core.memory import (
    InMemorySessionRepository,
    KeyFactsCompactionStrategy,
    MessageCountTrigger,
    compact_session,
)
from advisors_app.core.memory.compaction import KEY_FACTS_HEADER, render_key_facts, stated_facts
from advisors_app.core.memory.session import Boundary, SessionView
from advisors_app.core.tokens import TiktokenTokenCountEstimator
from tests.core.memory.messages import A, T, U, call

ALWAYS = MessageCountTrigger(1)


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        (
            "Hello! My name is Ada and my project code is X7-4431.",
            ["My name is Ada and my project code is X7-4431."],
        ),
        ("What is my project code?", []),
        ("How do decorators work in Python 3.12", []),  # a question without its "?"
        ("Do you remember my code?", []),
        (
            "Could you remember that my cat is called Tom?",
            ["Could you remember that my cat is called Tom?"],
        ),
        (
            "Do remember that the server runs on port 8080.",
            ["Do remember that the server runs on port 8080."],
        ),
        ("Please remember this. The deadline is 2025-06-01.", ["The deadline is 2025-06-01."]),
        ("Explain my code, please.", []),
        ("x = [i * 2 for i in range(10)]", []),
        ("The review is with Bob on Friday.", ["The review is with Bob on Friday."]),
        ("Thanks, that helps. Python is great.", []),
        ("- I prefer tabs\n- We  deploy   on Fridays", ["I prefer tabs", "We deploy on Fridays"]),
    ],
)
def test_stated_facts_keep_what_the_user_stated_and_drop_questions_and_requests(text, facts):
    assert stated_facts(text) == facts


async def compacted(repository, strategy, conversation="c"):
    result = await compact_session(repository, conversation, ALWAYS, strategy)
    assert result.boundary is not None
    return result


async def test_the_facts_replace_the_covered_turns_and_the_last_turns_stay_verbatim():
    repository = InMemorySessionRepository()
    log = [
        U("Hi! My name is Ada and my project code is X7-4431. What is a list?"),
        A("Nice to meet you, Ada. I will call you Grace, code Z9."),  # replies are not read
        U("What is the weather?"),
        call("t1"),
        T("t1", data="My name is Mallory, 42."),  # nor tool results
        A("sunny"),
        U("I deploy on Fridays."),
        A("ok"),
    ]
    await repository.aappend("c", log)
    result = await compacted(repository, KeyFactsCompactionStrategy(last_turns=1))
    assert result.summary == (
        f"{KEY_FACTS_HEADER}\n- My name is Ada and my project code is X7-4431."
    )
    boundary = result.boundary
    assert (boundary.covers_up_to, boundary.model, boundary.usage) == (6, "", None)
    view = await repository.aload_view("c")
    assert view.summary == result.summary and view.messages == tuple(log[6:])
    assert repository.log("c") == log  # the log is never rewritten


async def test_a_cut_is_never_inside_a_turn():
    # The late tool response makes "meanwhile" no turn start: the whole first turn is covered.
    log = [U("I use Oslo time."), call("t9"), U("meanwhile I wait"), T("t9"), A("done")]
    repository = InMemorySessionRepository()
    await repository.aappend("c", [*log, U("last"), A("ok")])
    result = await compacted(repository, KeyFactsCompactionStrategy(last_turns=1))
    assert result.boundary.covers_up_to == 5
    assert result.summary.splitlines()[1:] == ["- I use Oslo time.", "- meanwhile I wait"]
    view = await repository.aload_view("c")
    assert view.messages == (U("last"), A("ok"))
    # Nothing before the last turn but one turn: nothing to cover.
    single = InMemorySessionRepository()
    await single.aappend("c", log)
    strategy = KeyFactsCompactionStrategy(last_turns=1)
    assert (await compact_session(single, "c", ALWAYS, strategy)).unchanged


async def test_the_next_boundary_merges_the_previous_list_without_duplicates():
    repository = InMemorySessionRepository()
    strategy = KeyFactsCompactionStrategy(last_turns=1)
    await repository.aappend("c", [U("My name is Ada."), A("hi"), U("What is a dict?"), A("a map")])
    await compacted(repository, strategy)
    await repository.aappend(
        "c", [U("my name is  ADA!"), A("yes"), U("I live in Oslo."), A("nice")]
    )
    second = await compacted(repository, strategy)  # a question and a repeated fact
    assert second.summary == render_key_facts(["My name is Ada."])
    await repository.aappend("c", [U("And sets?"), A("unique items")])
    third = await compacted(repository, strategy)
    assert third.summary == render_key_facts(["My name is Ada.", "I live in Oslo."])
    assert len(repository.boundaries("c")) == 3


async def test_over_the_cap_the_facts_to_remember_go_first_then_the_earliest():
    estimate = TiktokenTokenCountEstimator().estimate
    early = [f"I visited city number {n} in 2024." for n in range(6)]
    remember = "Please remember that my badge is K-77."
    header = estimate(KEY_FACTS_HEADER + "\n")
    line = estimate(f"- {early[0]}\n")
    budget = header + estimate(f"- {remember}\n") + 3 * line
    repository = InMemorySessionRepository()
    await repository.aappend(
        "c", [U(" ".join(early)), A("ok"), U(remember), A("ok"), U("last"), A("ok")]
    )
    result = await compacted(repository, KeyFactsCompactionStrategy(1, max_tokens=budget))
    # Kept in their order: the three earliest that fit after the one asked to be remembered.
    assert result.summary == render_key_facts([*early[:3], remember])
    assert estimate(result.summary) <= budget
    # A fact larger than the whole budget is left out; a smaller one after it still fits.
    huge = "My notes: " + "word " * 400 + "end."
    messages = (U(huge), A("ok"), U("I am 7."), A("ok"), U("x"), A("y"))
    view = SessionView(messages=messages, positions=tuple(range(1, 7)), last_position=6)
    small = await KeyFactsCompactionStrategy(1, max_tokens=40).compact(view)
    assert small.summary == render_key_facts(["I am 7."])


async def test_no_fact_means_no_summary_and_a_summary_of_another_form_is_read_as_text():
    view = SessionView(
        boundary=Boundary(2, summary="The user said: my name is Ada. They asked about lists?"),
        messages=(U("What is a tuple?"), A("immutable"), U("next"), A("ok")),
        positions=(3, 4, 5, 6),
        last_position=6,
    )
    result = await KeyFactsCompactionStrategy(1).compact(view)
    assert result.summary == render_key_facts(["The user said: my name is Ada."])
    empty = SessionView(
        messages=(U("Hi!"), A("hello"), U("next"), A("ok")),
        positions=(1, 2, 3, 4),
        last_position=4,
    )
    result = await KeyFactsCompactionStrategy(1).compact(empty)
    assert result.summary == "" and result.boundary.covers_up_to == 2
    assert render_key_facts([]) == ""


def test_bounds_are_checked():
    with pytest.raises(ValueError, match="last_turns"):
        KeyFactsCompactionStrategy(0)
    with pytest.raises(ValueError, match="max_tokens"):
        KeyFactsCompactionStrategy(1, max_tokens=0)
