"""Session memory on PostgreSQL (issue 20): the ``session_memory`` type through the turn service,
the Django session repository, the compaction task in a real worker, lint rules."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core import (
    CONVERSATION_ID,
    AssistantMessage,
    ChatClient,
    ScriptedChatModel,
    SystemMessage,
    UserMessage,
)
from advisors_app.core.advisors import session_advisors
from advisors_app.core.advisors.session_memory import SUMMARY_HEADER
from advisors_app.core.memory import (
    CompactionPolicy,
    RecursiveSummarizationCompactionStrategy,
    TurnCountTrigger,
    WindowCompactionStrategy,
)
from advisors_app.core.tokens import TiktokenTokenCountEstimator
from advisors_app.definition import lint
from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.definition.snapshot import resolve_draft
from advisors_app.memory.compaction import compact_now
from advisors_app.models import ChatMessage, Conversation, ConversationBoundary
from advisors_app.stores.sessions import DjangoSessionRepository
from advisors_app.turn import call_turn
from tests.core.memory.messages import A, T, U, call
from tests.factories import make_chain, scripted_model
from tests.task_worker import DbWorker, run_queued_tasks

pytestmark = pytest.mark.django_db(transaction=True)

WINDOW = {"trigger": {"kind": "turns", "threshold": 2}, "strategy": "window", "keep_last_turns": 1}


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def rows(key: str) -> list[tuple[Any, ...]]:
    return list(
        ChatMessage.objects.filter(conversation__conversation_id=key)
        .order_by("sequence")
        .values_list("pk", "sequence", "message_type", "text")
    )


async def test_turns_through_the_service_are_stored_once_and_compaction_never_rewrites(user):
    await sync_to_async(make_chain)("s", advisors=(("session_memory", WINDOW),))
    assert (await sync_to_async(load_chain)("s")).has_memory
    first = await call_turn("s", user, "one")
    conversation = first.conversation_id
    for text in ("two", "three"):
        await call_turn("s", user, text, conversation_id=conversation)
    key = await Conversation.objects.values_list("conversation_id", flat=True).aget()
    before = await sync_to_async(rows)(key)
    assert [r[2:] for r in before] == [
        ("user", "one"),
        ("assistant", "Hello!"),
        ("user", "two"),
        ("assistant", "Hello!"),
        ("user", "three"),
        ("assistant", "Hello!"),
    ]
    assert await sync_to_async(run_queued_tasks)() >= 1  # queued when the third turn committed
    boundary = await ConversationBoundary.objects.aget()
    assert boundary.covers_up_to == before[3][1]  # the view keeps the last turn, from "three"
    assert await sync_to_async(rows)(key) == before  # rows, ids and sequences unchanged


async def test_the_summary_and_the_last_turns_verbatim_make_the_next_prompt():
    repository = DjangoSessionRepository()
    summarizer = ScriptedChatModel(["Ada likes tea."])
    policy = CompactionPolicy(
        TurnCountTrigger(2), RecursiveSummarizationCompactionStrategy(summarizer, last_turns=1)
    )
    model = ScriptedChatModel(["Hi.", "Noted.", "Sure.", "Ada."])
    chat = ChatClient(model, default_advisors=list(session_advisors(repository, policy)))
    for text in ("I am Ada", "I like tea", "More", "Who am I?"):
        await chat.prompt(text).advisor_param(CONVERSATION_ID, "k1").acall()
    boundary = await ConversationBoundary.objects.aget()
    assert boundary.summary == "Ada likes tea." and boundary.kind == "compaction"
    assert model.prompts[3].instructions == (
        SystemMessage(f"{SUMMARY_HEADER}\nAda likes tea."),
        UserMessage("More"),
        AssistantMessage("Sure."),
        UserMessage("Who am I?"),
    )
    assert len(await sync_to_async(rows)("k1")) == 8


async def test_a_boundary_is_never_between_a_tool_call_and_its_response():
    repository = DjangoSessionRepository()
    await Conversation.objects.acreate(conversation_id="k2")
    turns = [U("a"), call("t1"), T("t1"), call("t2"), T("t2"), A("done"), U("b"), A("2")]
    await repository.aappend("k2", [*turns, U("c"), call("t3"), T("t3"), A("3")])
    policy = {
        "trigger": {"kind": "turns", "threshold": 1},
        "strategy": "window",
        "keep_last_turns": 1,
        "summary_max_tokens": 256,
        "summary_model": None,
        "summary_prompt": None,
        "context_window": None,
    }
    result = await sync_to_async(compact_now)("k2", policy=policy)
    assert result.boundary.covers_up_to == 8
    view = await repository.aload_view("k2")
    assert view.messages[0] == U("c") and view.positions[0] == 9
    assert view.messages[1].tool_calls[0].id == view.messages[2].responses[0].id


async def test_inline_compaction_before_a_turn_that_would_not_fit():
    repository = DjangoSessionRepository()
    policy = CompactionPolicy(TurnCountTrigger(100), WindowCompactionStrategy(last_turns=2))
    model = ScriptedChatModel(["ok"], repeat=True)
    advisors = session_advisors(repository, policy, context_window=1000, reserve_tokens=100)
    chat = ChatClient(model, default_advisors=list(advisors))
    for n in range(10):
        await chat.prompt(f"{n} " + "word " * 100).advisor_param(CONVERSATION_ID, "k3").acall()
    estimator = TiktokenTokenCountEstimator()
    assert max(estimator.estimate(list(p.instructions)) for p in model.prompts) <= 650
    assert await ConversationBoundary.objects.acount() >= 2
    assert len(await sync_to_async(rows)("k3")) == 20  # the log is complete


KEY_FACTS = {
    "trigger": {"kind": "turns", "threshold": 2},
    "strategy": "key_facts",
    "keep_last_turns": 1,
    "summary_placement": "user",
}
FACT = "My name is Ada and my project code is X7-4431."


async def test_a_fact_from_the_first_turn_reaches_the_prompt_after_every_compaction(user):
    await sync_to_async(make_chain)("facts", advisors=(("session_memory", KEY_FACTS),))
    model: ScriptedChatModel = (await sync_to_async(load_chain)("facts")).client.chat_model
    key = (await call_turn("facts", user, f"Hi! {FACT} What is a list?")).conversation_id
    for n in range(1, 10):
        text = "I use Python 3.12 at work." if n == 4 else f"What does step {n} of a loop do?"
        await call_turn("facts", user, text, conversation_id=key)
        await sync_to_async(run_queued_tasks)()  # the compaction task, as a worker runs it
    await call_turn("facts", user, "What is my project code?", conversation_id=key)
    boundaries = [b async for b in ConversationBoundary.objects.order_by("covers_up_to")]
    assert len(boundaries) >= 4 and all(f"- {FACT}" in b.summary for b in boundaries)
    assert {(b.model, b.usage) for b in boundaries} == {("", None)}
    assert "- I use Python 3.12 at work." in boundaries[-1].summary
    *history, asked = model.prompts[-1].instructions
    assert asked.text.startswith(f"{SUMMARY_HEADER}\nFacts the user stated earlier")
    assert f"- {FACT}" in asked.text and asked.text.endswith("\n\nWhat is my project code?")
    assert not any("X7-4431" in m.text for m in history)  # turn 1 left the view long ago
    stored = await sync_to_async(rows)(
        await Conversation.objects.values_list("conversation_id", flat=True).aget()
    )
    assert len(stored) == 22 and stored[-2][2:] == ("user", "What is my project code?")


@pytest.mark.slow
def test_the_compaction_task_runs_in_a_real_worker(user, tmp_path):
    from asgiref.sync import async_to_sync

    make_chain("s", advisors=(("session_memory", WINDOW),))
    outcome = async_to_sync(call_turn)("s", user, "one")
    for text in ("two", "three"):
        async_to_sync(call_turn)("s", user, text, conversation_id=outcome.conversation_id)
    with DbWorker(tmp_path / "worker.log") as worker:
        worker.wait_ready()
        deadline = time.monotonic() + 60
        while not ConversationBoundary.objects.exists():
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.1)
    assert ConversationBoundary.objects.get().covers_up_to == 4
    assert ChatMessage.objects.count() == 6


def _lint_ids(chain: Any) -> list[str]:
    return [m.id for m in lint(resolve_draft(chain))]


def test_lint_places_session_memory_around_the_tool_loop_and_alone():
    low = -(2**31)
    model = scripted_model("m")
    good = make_chain("good", model=model, advisors=(("session_memory", {}), ("tool_calling", {})))
    assert not {"advisors_app.E116", "advisors_app.E117"} & set(_lint_ids(good))
    inside = make_chain(
        "inside",
        model=model,
        advisors=(("session_memory", {}, low + 400), ("tool_calling", {})),
        publish=False,
    )
    assert "advisors_app.E116" in _lint_ids(inside)
    both = make_chain(
        "both",
        model=model,
        advisors=(("session_memory", {}), ("message_chat_memory", {})),
        publish=False,
    )
    assert "advisors_app.E117" in _lint_ids(both)


def test_a_token_share_on_a_model_of_unknown_window_compacts_by_turns() -> None:
    from advisors_app.core.memory.compaction import TurnCountTrigger
    from advisors_app.memory.compaction import UNKNOWN_WINDOW_TURNS, _trigger

    trigger = _trigger({"trigger": {"kind": "tokens", "share": 0.35}, "context_window": None})
    assert isinstance(trigger, TurnCountTrigger)
    assert (
        trigger == TurnCountTrigger(UNKNOWN_WINDOW_TURNS)
        or getattr(trigger, "threshold", getattr(trigger, "turns", None)) == UNKNOWN_WINDOW_TURNS
    )


def test_memory_order_takes_the_forms_the_order_column_takes() -> None:
    from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
    from advisors_app.core.advisors.session_turn import SessionTurnAdvisor
    from advisors_app.definition.registry import params_errors

    for good in ("HIGHEST+350", "highest_precedence + 350", "LOWEST-10", "-5", 8):
        assert params_errors("session_memory", {"memory_order": good}) == {}, good
    assert params_errors("session_memory", {"memory_order": "HIGHEST-1"}) == {
        "params.memory_order": [
            f"Use {HIGHEST_PRECEDENCE} (HIGHEST) to {LOWEST_PRECEDENCE} (LOWEST)."
        ]
    }
    assert params_errors("session_memory", {"memory_order": "soon"}) == {
        "params.memory_order": ["Enter a whole number, HIGHEST+N or LOWEST-N."]
    }
    model = scripted_model("m")
    chain = make_chain(
        "rel",
        model=model,
        advisors=(("session_memory", {"memory_order": "HIGHEST+350"}), ("tool_calling", {})),
    )
    assert not {"advisors_app.E109", "advisors_app.E116"} & set(_lint_ids(chain))
    turn = next(a for a in load_chain("rel").advisors if isinstance(a, SessionTurnAdvisor))
    assert [a.order for a in turn.companions] == [HIGHEST_PRECEDENCE + 350]
    inside = make_chain(
        "inside",
        model=model,
        advisors=(("session_memory", {"memory_order": "HIGHEST+250"}), ("tool_calling", {})),
        publish=False,
    )
    assert "advisors_app.E116" in _lint_ids(inside)


@pytest.mark.parametrize(
    ("trigger", "message"),
    [
        (
            {"kind": "turns", "share": 0.5},
            'Only a "tokens" trigger takes a share; "turns" and "messages" count to threshold.',
        ),
        (
            {"kind": "messages", "threshold": 4, "share": 0.5},
            'Only a "tokens" trigger takes a share; "turns" and "messages" count to threshold.',
        ),
        (
            {"kind": "tokens", "share": 0.5, "threshold": 100},
            "Give a tokens trigger a threshold or a share, not both.",
        ),
    ],
)
def test_a_trigger_part_that_would_be_ignored_is_refused(
    trigger: dict[str, Any], message: str
) -> None:
    from advisors_app.definition.registry import params_errors

    assert params_errors("session_memory", {"trigger": trigger}) == {
        "params.trigger.share": [message]
    }


@pytest.mark.parametrize(
    "trigger",
    [
        {"kind": "turns"},
        {"kind": "messages", "threshold": 4},
        {"kind": "tokens"},
        {"kind": "tokens", "share": 0.5},
        {"kind": "tokens", "threshold": 100},
    ],
)
def test_a_trigger_of_one_kind_is_accepted(trigger: dict[str, Any]) -> None:
    from advisors_app.definition.registry import params_errors

    assert params_errors("session_memory", {"trigger": trigger}) == {}


@pytest.mark.parametrize(
    ("config", "name"),
    [
        ({"provider": "embedded"}, "smollm2-135m-instruct"),
        ({"provider": "openai", "model": "gpt-4o"}, "gpt-4o"),
        (
            {"provider": "openai", "model": "gpt-4o", "options": {"model": "gpt-4o-mini"}},
            "gpt-4o-mini",
        ),
        ({"provider": "scripted", "responses": ["x"]}, "scripted"),
    ],
)
def test_a_summary_boundary_records_the_model_name_not_the_provider(
    config: dict[str, Any], name: str
) -> None:
    from advisors_app.memory.compaction import _strategy

    strategy = _strategy({"keep_last_turns": 1, "strategy": "summarize", "summary_model": config})
    assert isinstance(strategy, RecursiveSummarizationCompactionStrategy)
    assert strategy.model_name == name


@pytest.mark.parametrize("strategy", ["window", "key_facts"])
@pytest.mark.parametrize("part", ["summary_model", "summary_prompt_template"])
def test_a_summary_model_or_prompt_without_summarization_is_refused(part, strategy) -> None:
    from advisors_app.definition.registry import params_errors

    assert params_errors("session_memory", {"strategy": strategy, part: "m"}) == {
        f"params.{part}": [
            'Only the "summarize" strategy uses a summary model and prompt; "window" and '
            '"key_facts" call no model.'
        ]
    }


def test_key_facts_are_bounded_by_summary_max_tokens_and_call_no_model() -> None:
    from advisors_app.core.memory import KeyFactsCompactionStrategy
    from advisors_app.definition.registry import params_errors
    from advisors_app.memory.compaction import _strategy

    params = {"strategy": "key_facts", "summary_max_tokens": 120, "summary_placement": "user"}
    assert params_errors("session_memory", params) == {}
    policy = {"keep_last_turns": 3, "strategy": "key_facts", "summary_max_tokens": 120}
    assert _strategy(policy) == KeyFactsCompactionStrategy(3, 120)


def test_lint_refuses_two_chat_memories_on_one_chain():
    """Both would store every turn in the same conversation (each message twice)."""
    model = scripted_model("m")
    both = make_chain(
        "two-memories",
        model=model,
        advisors=(("message_chat_memory", {}), ("prompt_chat_memory", {})),
        publish=False,
    )
    assert _lint_ids(both).count("advisors_app.E122") == 1
    one = make_chain("one-memory", model=model, advisors=(("message_chat_memory", {}),))
    assert "advisors_app.E122" not in _lint_ids(one)
