"""``ChatMemory.history_for``: a request aligned with what memory holds (issue 17).

For any stored conversation, any window size, and a request that carries any suffix of the
conversation followed by new messages: the new messages (and only they) are the ones to store,
and the history put before the request sends no message twice and never separates a tool call
from its response.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from advisors_app.core import AssistantMessage, ToolResponseMessage
from advisors_app.core.memory import ChatMemory, MessageWindowChatMemory, align_request
from tests.core.memory.messages import A, S, T, U, call


def well_formed(messages):
    """True when every tool call is answered right after it and no response lacks its call."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolResponseMessage):
            answered = {r.id for r in message.responses}
            if not answered <= open_calls:
                return False
            open_calls -= answered
            continue
        if open_calls:
            return False
        if isinstance(message, AssistantMessage):
            open_calls = {c.id for c in message.tool_calls}
    return not open_calls


@st.composite
def conversations(draw):
    """``(transcript, request, new)``: unique messages, the request a suffix plus new input."""
    ids = itertools.count()
    transcript = [A("Welcome!")] if draw(st.booleans()) else []
    for rounds, answered in draw(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=6)):
        transcript.append(U(f"u{next(ids)}"))
        for _ in range(rounds):
            c = f"c{next(ids)}"
            transcript += [call(c), T(c)]
        if answered or rounds == 0:
            transcript.append(A(f"a{next(ids)}"))
    if transcript and draw(st.booleans()):
        # The caller runs the tool of the last stored call and sends its result.
        c = f"c{next(ids)}"
        transcript.append(call(c))
        new = [T(c)]
    else:
        new = [U(f"new{next(ids)}")]
        if draw(st.booleans()):
            c = f"c{next(ids)}"
            new += [call(c), T(c)]
    held = draw(st.integers(0, len(transcript)))
    return transcript, transcript[len(transcript) - held :] + new, new


@settings(max_examples=400, deadline=None)
@given(conversations(), st.integers(1, 12))
def test_history_for_sends_each_message_once_and_stores_only_the_new_ones(case, max_messages):
    transcript, request, new = case
    memory = MessageWindowChatMemory(max_messages=max_messages)
    if transcript:
        memory.add("c", transcript)
    view = memory.history_for("c", [S("sys"), *request])
    assert list(view.new) == new
    prompt = [*view.history, *request]
    assert len(set(prompt)) == len(prompt), "a message is sent twice"
    assert well_formed(prompt), "a tool call is separated from its response"
    # The history is taken, in order, from the stored messages the request does not carry.
    older = transcript[: len(transcript) - (len(request) - len(new))]
    positions = [older.index(m) for m in view.history]
    assert positions == sorted(positions)
    # Every message of the window that the request does not carry is in the history.
    window = memory.get("c")
    assert [m for m in window if m in older] == [m for m in view.history if m in window]


def test_a_window_inside_the_request_after_the_callers_own_messages():
    memory = MessageWindowChatMemory()
    memory.add("c", [U("Hi"), A("Hello")])
    examples = [U("2+2?"), A("4")]
    view = memory.history_for("c", [*examples, U("Hi"), A("Hello"), U("3+3?")])
    assert view.history == ()
    # The caller's own lead-in is neither added nor stored.
    assert view.new == (U("3+3?"),)


def test_blank_messages_are_skipped_when_comparing_and_never_stored():
    memory = MessageWindowChatMemory()
    memory.add("c", [U("Hi"), A("Hello")])
    view = memory.history_for("c", [U("Hi"), U("  "), A("Hello"), A(""), U("Next")])
    assert view.history == ()
    assert view.new == (U("Next"),)


def test_system_messages_come_from_the_store_only():
    memory = MessageWindowChatMemory()
    memory.add("c", [S("stored"), U("Hi"), A("Hello")])
    view = memory.history_for("c", [S("requested"), U("Next")])
    assert view.system == (S("stored"),)
    assert view.history == (U("Hi"), A("Hello"))
    assert view.new == (U("Next"),)


async def test_the_default_implementation_aligns_with_get():
    class Fixed(ChatMemory):
        def get(self, conversation_id):
            return [S("sys"), U("Hi"), A("Hello")]

    view = await Fixed().ahistory_for("c", [U("Hi"), A("Hello"), U("Next")])
    assert view == Fixed().history_for("c", [U("Hi"), A("Hello"), U("Next")])
    assert (view.system, view.history, view.new) == ((S("sys"),), (), (U("Next"),))


def test_align_request_is_linear_in_its_inputs():
    tail = [m for i in range(5000) for m in (U(f"u{i}"), A(f"a{i}"))]
    history, new = align_request(tail, range(len(tail) - 20, len(tail)), [*tail[-10:], U("n")])
    assert history == tail[-20:-10]
    assert new == [U("n")]
