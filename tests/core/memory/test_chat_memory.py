"""MessageWindowChatMemory and TokenWindowChatMemory: reference §3.7 with the §5.3 fixes, B08."""

from __future__ import annotations

import pytest

from advisors_app.core.memory import (
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
    TokenWindowChatMemory,
)
from advisors_app.core.tokens import TiktokenTokenCountEstimator
from tests.core.memory.messages import A, S, T, U, call


def filled(max_messages: int, *messages, one_by_one: bool = True) -> MessageWindowChatMemory:
    memory = MessageWindowChatMemory(max_messages=max_messages)
    if one_by_one:
        for message in messages:
            memory.add("c1", message)
    else:
        memory.add("c1", list(messages))
    return memory


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, None])
def test_max_messages_must_be_positive(bad):
    with pytest.raises(ValueError, match=r"^maxMessages must be greater than 0$"):
        MessageWindowChatMemory(max_messages=bad)


def test_defaults_are_spring_ais():
    memory = MessageWindowChatMemory()
    assert memory.max_messages == 20
    assert isinstance(memory.repository, InMemoryChatMemoryRepository)


def test_messages_are_returned_in_order_while_they_fit():
    memory = filled(10, U("Hi"), A("Hello"), U("Again"), A("Hi again"))
    assert memory.get("c1") == [U("Hi"), A("Hello"), U("Again"), A("Hi again")]
    assert memory.get("unknown") == []


@pytest.mark.parametrize("one_by_one", [True, False])
def test_eviction_snaps_forward_to_a_whole_turn(one_by_one):
    # The last 5 messages start at A1; the window starts at the next user message instead.
    memory = filled(5, U("1"), A("a1"), U("2"), A("a2"), U("3"), A("a3"), one_by_one=one_by_one)
    assert memory.get("c1") == [U("2"), A("a2"), U("3"), A("a3")]


def test_a_window_exactly_full_keeps_every_turn():
    memory = filled(4, U("1"), A("a1"), U("2"), A("a2"))
    assert memory.get("c1") == [U("1"), A("a1"), U("2"), A("a2")]


def test_system_messages_are_kept_first_and_not_counted():
    memory = filled(4, S("Be terse"), U("1"), A("a1"), U("2"), A("a2"), U("3"), A("a3"))
    assert memory.get("c1") == [S("Be terse"), U("2"), A("a2"), U("3"), A("a3")]


def test_several_system_messages_of_one_batch_survive_eviction():
    # Spring AI's multipleSystemMessagesArePreservedDuringEviction ends with only the system
    # messages (defect 5.3.18); here the newest turn that fits is kept as well.
    memory = filled(2, S("s1"), S("s2"), U("1"), A("a1"), U("2"), A("a2"), one_by_one=False)
    assert memory.get("c1") == [S("s1"), S("s2"), U("2"), A("a2")]


def test_a_new_system_message_replaces_the_stored_ones():
    memory = filled(10, S("old"), U("1"), A("a1"))
    memory.add("c1", [S("new"), U("2")])
    assert memory.get("c1") == [S("new"), U("1"), A("a1"), U("2")]
    assert S("old") not in memory.repository.find_by_conversation_id("c1")


def test_re_adding_a_stored_system_message_does_not_duplicate_it():
    memory = filled(10, S("sys"), U("1"))
    memory.add("c1", [S("sys"), A("a1")])
    memory.add("c1", S("sys"))
    assert memory.get("c1") == [S("sys"), U("1"), A("a1")]
    assert memory.repository.find_by_conversation_id("c1").count(S("sys")) == 1


def test_system_message_equality_ignores_metadata():
    memory = filled(10, S("sys"))
    memory.add("c1", S("sys").with_metadata(source="db"))
    assert memory.get("c1") == [S("sys")]


def test_newest_turn_that_fits_is_never_evicted():
    # Spring AI evicts everything when no user message follows the raw cut.
    memory = filled(3, U("1"), A("a1"), U("2"), call("t1"), T("t1"))
    assert memory.get("c1") == [U("2"), call("t1"), T("t1")]


def test_a_turn_longer_than_the_window_keeps_its_user_message_and_a_valid_tail():
    messages = [U("q"), call("t1"), T("t1"), call("t2"), T("t2"), A("done")]
    assert filled(4, *messages).get("c1") == [U("q"), call("t2"), T("t2"), A("done")]
    assert filled(3, *messages).get("c1") == [U("q"), A("done")]
    assert filled(1, *messages).get("c1") == [U("q")]


def test_a_long_turn_is_found_beyond_the_first_read():
    rounds = [m for i in range(30) for m in (call(f"t{i}"), T(f"t{i}"))]
    memory = filled(3, U("old"), A("a"), U("q"), *rounds, A("done"), one_by_one=False)
    assert memory.get("c1") == [U("q"), A("done")]


def test_b08_window_never_starts_with_an_orphan_tool_result():
    memory = MessageWindowChatMemory(max_messages=3)
    memory.add("c1", U("Weather?"))
    memory.add("c1", call("t1"))
    memory.add("c1", T("t1"))
    assert memory.get("c1") == [U("Weather?"), call("t1"), T("t1")]
    memory.add("c1", A("It is sunny"))
    window = memory.get("c1")
    assert window[0] == U("Weather?")
    assert T("t1") not in window or call("t1") in window
    memory.add("c1", U("And tomorrow?"))
    assert memory.get("c1") == [U("And tomorrow?")]


def test_messages_before_the_first_user_message_start_a_window_only_while_all_fits():
    # Issue 17: a greeting is part of the conversation; only trimming starts at a user message.
    assert filled(10, A("Welcome!")).get("c1") == [A("Welcome!")]
    greeted = (A("Welcome!"), U("Hi"), A("Hello"))
    assert filled(10, *greeted).get("c1") == list(greeted)
    assert filled(3, *greeted).get("c1") == list(greeted)
    assert filled(2, *greeted).get("c1") == [U("Hi"), A("Hello")]


def test_a_stored_orphan_tool_response_is_left_out_of_the_window():
    memory = filled(10, U("q"), T("t9"), call("t1"), T("t1", "t9"), A("ok"), one_by_one=False)
    window = memory.get("c1")
    assert window == [U("q"), call("t1"), T("t1"), A("ok")]


def test_the_repository_keeps_the_whole_transcript():
    messages = [U(str(i)) if i % 2 == 0 else A(str(i)) for i in range(10)]
    memory = filled(2, *messages)
    assert len(memory.get("c1")) == 2
    assert memory.repository.find_by_conversation_id("c1") == messages


def test_empty_batches_store_nothing_and_clear_forgets():
    memory = filled(5, U("1"))
    memory.add("c1", [])
    assert memory.repository.find_by_conversation_id("c1") == [U("1")]
    memory.clear("c1")
    assert memory.get("c1") == []
    assert memory.repository.find_conversation_ids() == []


@pytest.mark.parametrize(
    ("conversation_id", "message"),
    [
        (None, "^conversationId cannot be null or empty$"),  # Spring ChatMemory: Assert.hasText
        ("", "^conversationId cannot be null or empty$"),
        ("  \t", "^conversationId cannot be null or empty$"),
        ("x" * 256, "at most 255 characters"),
        (42, "must be a string, got int"),
    ],
)
def test_conversation_ids_are_checked_by_every_method(conversation_id, message):
    memory = MessageWindowChatMemory()
    for method, args in ((memory.add, (U("x"),)), (memory.get, ()), (memory.clear, ())):
        with pytest.raises(ValueError, match=message):
            method(conversation_id, *args)


def test_messages_are_checked():
    memory = MessageWindowChatMemory()
    with pytest.raises(ValueError, match=r"^messages cannot be null$"):
        memory.add("c1", None)
    with pytest.raises(ValueError, match=r"^messages cannot contain null elements$"):
        memory.add("c1", [U("x"), None])
    with pytest.raises(ValueError, match=r"must be chat messages"):
        memory.add("c1", ["just text"])


async def test_async_twins_match_the_sync_methods():
    memory = MessageWindowChatMemory(max_messages=3)
    await memory.aadd("c1", [S("sys"), U("1"), A("a1")])
    await memory.aadd("c1", [U("2"), A("a2")])
    assert await memory.aget("c1") == memory.get("c1") == [S("sys"), U("2"), A("a2")]
    await memory.aclear("c1")
    assert await memory.aget("c1") == []


class WordCount:
    """Counts one token per word, so budgets in tests are easy to follow."""

    def estimate(self, content):
        return len(content.text.split()) if content.text else 1


def test_token_window_keeps_the_newest_turns_within_the_budget():
    memory = TokenWindowChatMemory(max_tokens=6, token_count_estimator=WordCount())
    memory.add("c1", [S("a long system prompt is never counted"), U("one two"), A("three")])
    memory.add("c1", [U("four five"), A("six")])
    memory.add("c1", [U("seven"), A("eight nine")])
    assert memory.get("c1") == [
        S("a long system prompt is never counted"),
        U("four five"),
        A("six"),
        U("seven"),
        A("eight nine"),
    ]


def test_token_window_reads_past_the_first_page_when_turns_are_small():
    memory = TokenWindowChatMemory(max_tokens=1000, token_count_estimator=WordCount())
    for i in range(60):
        memory.add("c1", [U(f"q{i}"), A(f"a{i}")])
    assert len(memory.get("c1")) == 120


def test_token_window_with_an_oversized_newest_turn():
    memory = TokenWindowChatMemory(max_tokens=4, token_count_estimator=WordCount())
    memory.add("c1", [U("q"), A("a b c d e f"), U("why"), call("t1"), T("t1"), A("because")])
    assert memory.get("c1") == [U("why"), call("t1"), T("t1"), A("because")]
    memory.add("c1", [U("one two three four five")])
    assert memory.get("c1") == []


def test_token_window_counts_with_tiktoken_by_default():
    memory = TokenWindowChatMemory(max_tokens=40)
    assert isinstance(memory.token_count_estimator, TiktokenTokenCountEstimator)
    memory.add("c1", [U("What is the capital of France?"), A("Paris.")])
    memory.add("c1", [U("And of Norway?"), A("Oslo.")])
    estimate = memory.token_count_estimator.estimate
    assert estimate([U("And of Norway?"), A("Oslo.")]) <= 40
    assert estimate(memory.repository.find_by_conversation_id("c1")) > 20
    window = memory.get("c1")
    assert window[-2:] == [U("And of Norway?"), A("Oslo.")]
    assert estimate(window) <= 40


@pytest.mark.parametrize("bad", [0, -5])
def test_token_budget_must_be_positive(bad):
    with pytest.raises(ValueError, match=r"^maxTokens must be greater than 0$"):
        TokenWindowChatMemory(max_tokens=bad)
