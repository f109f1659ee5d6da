"""Window invariants over random conversations (bug case B08), with hypothesis.

Every window, after every add, for any window size:

* is the whole conversation when it fits (an assistant greeting included, issue 17), else starts
  at a user message (after the system messages), never at an assistant or tool message;
* holds no tool response without the assistant call it answers;
* holds at most ``max_messages`` non-system messages;
* is not empty when the conversation has a user message (its newest turn is kept if it fits);

and for well-formed conversations it is the longest run of whole turns that fits, a suffix of
the transcript.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from advisors_app.core import AssistantMessage, SystemMessage, ToolResponseMessage, UserMessage
from advisors_app.core.memory import (
    MessageWindowChatMemory,
    drop_orphan_tool_responses,
    select_window,
)
from tests.core.memory.messages import A, S, T, U, call

_ids = st.sampled_from(["t1", "t2", "t3"])


@st.composite
def turns(draw):
    """One well-formed turn: a user message, tool rounds, usually a final answer."""
    index = draw(st.integers(0, 10_000))
    messages = [U(f"q{index}")]
    for round_ in range(draw(st.integers(0, 3))):
        ids = [f"r{index}-{round_}-{i}" for i in range(draw(st.integers(1, 2)))]
        messages += [call(*ids), T(*ids)]
    if draw(st.booleans()) or len(messages) == 1:
        messages.append(A(f"a{index}"))
    return messages


@st.composite
def well_formed(draw):
    """A conversation: maybe an assistant greeting, whole turns, system messages in between."""
    messages = [A("Welcome!")] if draw(st.booleans()) else []
    for turn in draw(st.lists(turns(), max_size=8)):
        if draw(st.integers(0, 5)) == 0:
            messages.append(S(f"system {len(messages)}"))
        messages += turn
    return messages


_any_message = st.one_of(
    st.builds(U, st.sampled_from(["x", "y"])),
    st.builds(A, st.sampled_from(["x", "y"])),
    st.builds(lambda ids: call(*ids), st.lists(_ids, min_size=1, max_size=2, unique=True)),
    st.builds(lambda ids: T(*ids), st.lists(_ids, min_size=1, max_size=2, unique=True)),
    st.builds(S, st.sampled_from(["s1", "s2"])),
)


def batches(messages, sizes):
    """Split ``messages`` into consecutive batches of the drawn sizes (the rest one by one)."""
    out, i = [], 0
    for size in sizes:
        if i >= len(messages):
            break
        out.append(messages[i : i + size])
        i += size
    out += [[m] for m in messages[i:]]
    return out


def check_invariants(window, transcript, max_messages, *, fits=None):
    systems = [m for m in window if isinstance(m, SystemMessage)]
    history = window[len(systems) :]
    assert not any(isinstance(m, SystemMessage) for m in history), "system messages come first"
    assert len(history) <= max_messages
    if len(transcript) <= max_messages if fits is None else fits:
        assert history == drop_orphan_tool_responses(transcript), "what fits is kept whole"
    elif history:
        assert isinstance(history[0], UserMessage), "a trimmed window starts at a user message"
    called = set()
    for message in history:
        if isinstance(message, AssistantMessage):
            called.update(c.id for c in message.tool_calls)
        if isinstance(message, ToolResponseMessage):
            assert {r.id for r in message.responses} <= called, "tool response without its call"
    if any(isinstance(m, UserMessage) for m in transcript):
        assert history, "a conversation with a user message never gets an empty window"
    return history


def turn_starts(messages):
    return [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]


@settings(max_examples=300, deadline=None)
@given(well_formed(), st.integers(1, 12), st.lists(st.integers(1, 4), max_size=20))
def test_windows_of_well_formed_conversations(messages, max_messages, sizes):
    memory = MessageWindowChatMemory(max_messages=max_messages)
    transcript = []
    for batch in batches(messages, sizes):
        memory.add("c", batch)
        transcript += [m for m in batch if not isinstance(m, SystemMessage)]
        history = check_invariants(memory.get("c"), transcript, max_messages)
        starts = turn_starts(transcript)
        if len(transcript) <= max_messages:
            assert history == transcript
            continue
        if not starts:
            assert history == []
            continue
        newest = transcript[starts[-1] :]
        if len(newest) <= max_messages:
            # The longest run of whole turns that fits, unchanged.
            fitting = [s for s in starts if len(transcript) - s <= max_messages]
            assert history == transcript[fitting[0] :]
        else:
            assert history[0] == transcript[starts[-1]]
            tail = history[1:]
            assert tail == newest[len(newest) - len(tail) :]


@settings(max_examples=300, deadline=None)
@given(st.lists(_any_message, max_size=30), st.integers(1, 8), st.lists(st.integers(1, 4)))
def test_windows_of_arbitrary_sequences_keep_the_invariants(messages, max_messages, sizes):
    memory = MessageWindowChatMemory(max_messages=max_messages)
    transcript = []
    for batch in batches(messages, sizes):
        memory.add("c", batch)
        transcript += [m for m in batch if not isinstance(m, SystemMessage)]
        check_invariants(memory.get("c"), transcript, max_messages)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(_any_message.filter(lambda m: not isinstance(m, SystemMessage)), max_size=30),
    st.integers(1, 40),
)
def test_token_budget_is_never_exceeded_unless_by_nothing(messages, budget):
    def cost(message):
        return 1 + len(message.text)

    window = select_window(messages, budget, cost, complete=True)
    assert sum(cost(m) for m in window) <= budget
    fits = sum(cost(m) for m in messages) <= budget
    check_invariants(window, messages if fits else [], budget, fits=fits)


def test_select_window_asks_for_more_when_older_turns_might_fit():
    tail = [A("a1"), U("2"), A("a2")]
    assert select_window(tail, 5, lambda m: 1, complete=False) is None
    assert select_window(tail, 2, lambda m: 1, complete=False) == [U("2"), A("a2")]


def test_select_window_keeps_leading_messages_only_while_everything_fits():
    greeting = [A("Welcome!"), U("2"), A("a2")]
    assert select_window(greeting, 3, lambda m: 1, complete=True) == greeting
    assert select_window(greeting, 2, lambda m: 1, complete=True) == [U("2"), A("a2")]
    # A leading orphan tool response is still dropped.
    orphan = [T("t0"), U("2"), A("a2")]
    assert select_window(orphan, 3, lambda m: 1, complete=True) == [U("2"), A("a2")]
