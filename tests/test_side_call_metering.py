"""Model calls outside the model advisors are metered like a turn's (issue 36, "Smaller"):
a retrieval advisor's query rewriting (in the turn, call and stream), a session-memory
compaction's summary (after the turn) and an ``llm_judge``'s verdict (in an evaluation run) are
priced, charged to the same user's budgets and recorded in the turn's call log."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from advisors_app.costs.budgets import clear_budget_cache
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.runs import create_run, eval_user, execute_run
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.memory.compaction import compact_now
from advisors_app.models import (
    Budget,
    BudgetCounter,
    CallLog,
    ChatModelConfig,
    Collection,
    ModelPrice,
)
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import DoneEvent
from tests.eval_fixtures import make_dataset
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    for clear in (clear_cache, clear_price_cache, clear_budget_cache):
        clear()
    yield
    for clear in (clear_cache, clear_price_cache, clear_budget_cache):
        clear()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def priced(slug: str, *answers: str, per_million: int = 1) -> ChatModelConfig:
    """A scripted model priced per million tokens: ``per_million`` in, twice that out (USD)."""
    model = scripted_model(slug, responses=answers or ("Fine.",))
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model,
        input_per_million=Decimal(per_million),
        output_per_million=Decimal(2 * per_million),
    )
    return model


def spent(budget: Budget) -> Decimal:
    return BudgetCounter.objects.get(budget=budget).spent


def rounds_of(trace_id: str) -> list[dict[str, Any]]:
    return list(CallLog.objects.get(trace_id=trace_id).cost_rounds)


@pytest.fixture
def rewriting_chain() -> str:
    ingest_text(Collection.objects.create(slug="kb", name="KB"), "faq.md", "Refunds take 5 days.")
    priced("rewriter", "refund duration", per_million=1000)
    make_chain(
        "rag",
        model=priced("answerer", "Five days."),
        advisors=(
            (
                "retrieval_augmentation",
                {"collection": "kb", "rewrite_query_with": "rewriter", "allow_empty_context": True},
            ),
        ),
    )
    return "rag"


def assert_rewrite_metered(trace_id: str, budget: Budget) -> None:
    log = CallLog.objects.get(trace_id=trace_id)
    assert [r["model_config"] for r in log.cost_rounds] == ["rewriter", "answerer"]
    rewrite = log.cost_rounds[0]
    assert rewrite["prompt_tokens"] > 0 and Decimal(rewrite["input_cost"]) > 0
    assert log.total_cost == sum(
        Decimal(r["input_cost"]) + Decimal(r["output_cost"]) for r in log.cost_rounds
    )
    assert spent(budget) == log.total_cost


def test_query_rewriting_is_metered_in_call(rewriting_chain: str, user: Any) -> None:
    budget = Budget.objects.create(name="mine", scope="user", period="day", limit=Decimal(10))
    outcome = async_to_sync(call_turn)(rewriting_chain, user, "How long do refunds take?")
    assert outcome.content == "Five days."
    assert_rewrite_metered(outcome.trace_id, budget)


def test_query_rewriting_is_metered_in_stream(rewriting_chain: str, user: Any) -> None:
    budget = Budget.objects.create(name="mine", scope="user", period="day", limit=Decimal(10))

    async def run() -> DoneEvent:
        stream = await stream_turn(rewriting_chain, user, "How long do refunds take?")
        events = [event async for event in stream]
        assert isinstance(events[-1], DoneEvent)
        return events[-1]

    done = async_to_sync(run)()
    assert_rewrite_metered(done.trace_id, budget)


def test_query_rewriting_is_refused_by_a_used_up_budget(rewriting_chain: str, user: Any) -> None:
    # Room for the answer's call, not for the rewrite's at 1000 USD per million tokens.
    Budget.objects.create(name="tiny", scope="user", period="day", limit=Decimal("0.01"))
    with pytest.raises(Exception) as refused:
        async_to_sync(call_turn)(rewriting_chain, user, "How long do refunds take?")
    assert "budget" in str(refused.value).lower()


def test_a_compaction_summary_is_metered_for_the_conversation_owner(user: Any) -> None:
    chain = make_chain("chat", model=priced("chatter", "Noted."))
    summarizer = priced("summarizer", "Ada likes tea.", per_million=100)
    budget = Budget.objects.create(name="mine", scope="user", period="day", limit=Decimal(10))
    first = async_to_sync(call_turn)(chain.slug, user, "I am Ada.")
    second = async_to_sync(call_turn)(
        chain.slug, user, "I like tea.", conversation_id=first.conversation_id
    )
    before = spent(budget)
    policy = {
        "trigger": {"kind": "turns", "threshold": 1},
        "strategy": "summarize",
        "keep_last_turns": 1,
        "summary_max_tokens": 64,
        "summary_model": summarizer.to_config(),
        "summary_model_slug": "summarizer",
        "summary_prompt": None,
        "context_window": None,
    }
    result = compact_now(f"{user.pk}:{first.conversation_id}", policy=policy)
    assert result.boundary is not None and result.boundary.summary == "Ada likes tea."
    # Logged with the conversation's latest turn, priced by the summariser's configuration.
    summary_round = rounds_of(second.trace_id)[-1]
    assert (summary_round["purpose"], summary_round["model_config"]) == ("compaction", "summarizer")
    cost = Decimal(summary_round["input_cost"]) + Decimal(summary_round["output_cost"])
    assert cost > 0
    log = CallLog.objects.get(trace_id=second.trace_id)
    assert log.total_cost == sum(
        Decimal(r["input_cost"]) + Decimal(r["output_cost"]) for r in log.cost_rounds
    )
    assert spent(budget) == before + cost


def test_an_llm_judge_in_an_evaluation_run_is_metered(user: Any) -> None:
    make_chain("support", model=priced("support-model", "Refunds take 5 business days."))
    judge = priced("judge", '{"score": 5, "reason": "Correct."}', per_million=50)
    assert judge.slug == "judge"
    budget = Budget.objects.create(name="evals", scope="user", period="day", limit=Decimal(10))
    budget.user = eval_user()
    budget.save()
    dataset = make_dataset()
    evaluators = [{"key": "llm_judge", "params": {"rubric": "Is it right?", "model": "judge"}}]
    run = execute_run(create_run(dataset, "support", evaluators=evaluators).pk)
    assert run is not None and run.status == "done"
    total = Decimal(0)
    for result in run.results.all():
        assert result.scores["llm_judge"]["value"] == 1.0
        judged = [r for r in result.call_log.cost_rounds if r.get("purpose") == "judge"]
        assert [r["model_config"] for r in judged] == ["judge"]
        total += result.call_log.total_cost
    assert spent(budget) == total
