"""Costs and budgets through the turn service, on real PostgreSQL: prices, reservations under
concurrency, cancellation, downgrade, warnings and refusals."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection

from advisors_app.core.context_window import estimate_prompt_tokens
from advisors_app.core.exceptions import BudgetExceededError
from advisors_app.core.messages import SystemMessage, UserMessage
from advisors_app.core.prompt import Prompt
from advisors_app.core.tokens import TiktokenTokenCountEstimator
from advisors_app.costs.budgets import budget_warning, clear_budget_cache
from advisors_app.costs.metering import PROMPT_TOKEN_FACTOR
from advisors_app.costs.pricing import ModelRef, clear_price_cache, cost_of, price_book
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import Budget, BudgetCounter, CallLog, ChatModelConfig, ModelPrice
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import BudgetWarningEvent, DeltaEvent, DoneEvent, TurnError
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)
MILLION = Decimal(1_000_000)


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    clear_cache()
    clear_price_cache()
    clear_budget_cache()
    yield
    clear_cache()
    clear_price_cache()
    clear_budget_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def priced_model(slug: str, answer: str = "Fine.", **settings: Any) -> ChatModelConfig:
    """A scripted model priced by an admin price: 1 per million input tokens, 2 per million
    output tokens (USD)."""
    model = scripted_model(slug, responses=(answer,))
    model.settings = {**model.settings, **settings}
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    return model


def prompt_tokens(message: str, system: str = "Be brief.") -> int:
    return estimate_prompt_tokens(Prompt([SystemMessage(system), UserMessage(message)]))


def counter(budget: Budget) -> BudgetCounter:
    return BudgetCounter.objects.get(budget=budget)


# -- prices ------------------------------------------------------------------------------


def test_an_admin_price_beats_genai_prices() -> None:
    model = ChatModelConfig.objects.create(
        slug="gpt", provider="scripted", model="gpt-4o", pricing="auto"
    )
    ref = ModelRef("gpt", "scripted", "gpt-4o")
    packaged = price_book(fresh=True).price_for(ref)
    assert packaged is not None and packaged.source == "genai-prices"
    assert packaged.input == Decimal("2.5")  # genai-prices' gpt-4o input price per million
    ModelPrice.objects.create(
        model_pattern="gpt-4o*", input_per_million=Decimal(1), output_per_million=Decimal(3)
    )
    pattern = price_book(fresh=True).price_for(ref)
    assert (pattern.source, pattern.input, pattern.output) == ("override", 1, 3)
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(7), output_per_million=Decimal(8)
    )
    assert price_book(fresh=True).price_for(ref).input == 7  # the configuration's row wins


def test_a_free_model_costs_zero_and_an_unknown_price_is_flagged_not_zero() -> None:
    book = price_book(fresh=True)
    free = book.price_for(ModelRef("embedded", "embedded", "smollm2"))
    assert free is not None and free.source == "free"
    assert cost_of(free, 1000, 1000).total == 0
    local = book.price_for(ModelRef("local", "openai", "llama", "http://127.0.0.1:8080/v1"))
    assert local is not None and local.source == "free"  # self-hosted: free by default
    unknown = book.price_for(ModelRef("x", "openai", "my-private-model", "https://llm.example"))
    assert unknown is None
    cost = cost_of(unknown, 1000, 1000)
    assert (cost.total, cost.source) == (None, "unknown")


async def test_the_call_log_stores_each_rounds_cost(user: Any) -> None:
    model = await sync_to_async(priced_model)("priced")
    chain = await sync_to_async(make_chain)(model=model, system_prompt="Be brief.")
    await call_turn(chain.slug, user, "How much is this?")
    log = await CallLog.objects.aget()
    tokens = prompt_tokens("How much is this?")
    assert log.input_cost == Decimal(tokens) / MILLION
    assert log.output_cost == Decimal(2) * 2 / MILLION  # "Fine." is 2 tokens
    assert log.total_cost == log.input_cost + log.output_cost
    assert (log.currency, log.price_source) == ("USD", "override")
    (round_,) = log.cost_rounds
    assert round_["model_config"] == "priced" and round_["estimated"] is True


async def test_an_unknown_price_is_stored_as_unknown(user: Any) -> None:
    model = await sync_to_async(scripted_model)("mystery")
    model.pricing = "manual"  # and no admin price
    await model.asave()
    chain = await sync_to_async(make_chain)(model=model)
    outcome = await call_turn(chain.slug, user, "hi")
    log = await CallLog.objects.aget()
    assert (log.total_cost, log.price_source) == (None, "unknown")
    assert outcome.cost["total"] is None and outcome.cost["price_source"] == "unknown"


# -- budgets -----------------------------------------------------------------------------


def test_twenty_concurrent_calls_with_budget_for_seven_admit_seven(user: Any) -> None:
    """Real threads, each with its own event loop and database connection."""
    model = ChatModelConfig.objects.create(
        slug="output-only", provider="scripted", settings={"responses": ["ok"], "chunk_delay": 0}
    )
    model.pricing = "manual"
    model.save()
    # Input is free and the answer ("ok", one token) is all max_tokens allows, so a call's
    # worst case is exactly its actual cost: the limit admits exactly seven whatever the
    # interleaving.
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(0), output_per_million=Decimal(1000)
    )
    chain = make_chain(model=model, system_prompt="Be brief.")
    one = Decimal(1000) / MILLION
    budget = Budget.objects.create(name="daily", scope="user", period="day", limit=one * 7)
    one_token = {"options": {"max_tokens": 1}}
    results: list[str] = []
    start = threading.Barrier(20)

    def run() -> None:
        start.wait()
        try:
            async_to_sync(call_turn)(chain.slug, user, "same question", params=one_token)
            results.append("ok")
        except TurnError as refused:
            results.append(refused.code)
        except Exception as exc:  # refused inside the chain
            results.append(type(exc).__name__)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count("ok") == 7, results
    assert set(results) <= {"ok", "budget_exceeded", "BudgetExceededError"}
    state = counter(budget)
    assert state.spent == one * 7 and state.reserved == 0
    assert sum(log.total_cost for log in CallLog.objects.filter(status="ok")) == one * 7


async def test_a_cancelled_stream_settles_its_partial_cost_and_releases_the_rest(
    user: Any,
) -> None:
    model = await sync_to_async(priced_model)("slow", chunk_delay=0.05)
    model.settings = {
        "responses": [["one ", "two ", "three ", "four ", "five"]],
        "chunk_delay": 0.05,
    }
    await model.asave()
    chain = await sync_to_async(make_chain)(model=model, system_prompt="Be brief.")
    budget = await Budget.objects.acreate(name="daily", period="day", limit=Decimal(1))
    stream = await stream_turn(chain.slug, user, "count", params={"options": {"max_tokens": 500}})
    async for event in stream:
        if isinstance(event, DeltaEvent):
            reserved = (await BudgetCounter.objects.aget(budget=budget)).reserved
            # The worst case: the prompt's bound and 500 answer tokens, reserved before the call.
            bound = PROMPT_TOKEN_FACTOR * prompt_tokens("count")
            assert reserved == (Decimal(bound) + 500 * 2) / MILLION
            break
    await stream.aclose()
    state = await BudgetCounter.objects.aget(budget=budget)
    log = await CallLog.objects.aget()
    assert log.status == "cancelled"
    assert state.reserved == 0
    assert state.spent == log.total_cost
    sent = TiktokenTokenCountEstimator().estimate("one ")  # the one delta that arrived
    assert log.output_cost == Decimal(2 * sent) / MILLION


async def test_a_used_up_budget_refuses_every_transport_shape_with_its_reset_time(
    user: Any,
) -> None:
    model = await sync_to_async(priced_model)("p")
    # A long system text: the message alone fits what is left, the whole prompt does not.
    long_system = "Answer briefly and precisely. " * 20
    chain = await sync_to_async(make_chain)(model=model, system_prompt=long_system)
    budget = await Budget.objects.acreate(name="tiny", period="day", limit=Decimal("0.0004"))
    few = {"options": {"max_tokens": 5}}
    await call_turn(chain.slug, user, "first", params=few)  # fits
    state = await BudgetCounter.objects.aget(budget=budget)
    assert state.spent > 0
    # The message alone cannot fit what is left: refused before the turn runs.
    with pytest.raises(TurnError) as early:
        await call_turn(chain.slug, user, "second", params={"options": {"max_tokens": 150}})
    assert early.value.code == "budget_exceeded"
    assert "left, less than this call may cost (up to" in early.value.message
    # The message fits, the prompt with the system text does not: refused inside the chain,
    # before the model is called.
    with pytest.raises(BudgetExceededError):
        await call_turn(chain.slug, user, "second", params={"options": {"max_tokens": 50}})
    # Used up entirely: refused before the turn runs (a stream before it opens).
    await BudgetCounter.objects.filter(budget=budget).aupdate(spent=Decimal("0.0004"))
    with pytest.raises(TurnError) as refused:
        await stream_turn(chain.slug, user, "third")
    error = refused.value
    assert (error.code, error.http_status) == ("budget_exceeded", 429)
    assert error.reset_at is not None and error.retry_after >= 1
    assert "'tiny' (0.0004 USD per day) is used up; it resets at" in error.message


async def test_downgrade_switches_the_model_for_the_rest_of_the_period(user: Any) -> None:
    model = await sync_to_async(priced_model)("big", answer="From the big model.")
    cheap = await sync_to_async(scripted_model)("cheap", responses=("From the cheap model.",))
    chain = await sync_to_async(make_chain)(model=model, system_prompt="Be brief.")
    # Room for the big model's worst case once: the prompt's bound and 300 answer tokens.
    limit = (Decimal(PROMPT_TOKEN_FACTOR * prompt_tokens("hello")) + 2 * 300) / MILLION
    await Budget.objects.acreate(
        name="switch",
        period="day",
        limit=limit,
        action="downgrade",
        downgrade_to=cheap,
    )
    options = {"options": {"max_tokens": 300}}
    first = await call_turn(chain.slug, user, "hello", params=options)
    assert first.content == "From the big model."
    second = await call_turn(chain.slug, user, "hello", params=options)
    assert second.content == "From the cheap model."
    # Even a call that would fit again stays on the cheap model until the period ends.
    third = await call_turn(chain.slug, user, "hi", params={"options": {"max_tokens": 1}})
    assert third.content == "From the cheap model."
    logs = [log async for log in CallLog.objects.order_by("created")]
    assert [log.cost_rounds[0]["model_config"] for log in logs] == ["big", "cheap", "cheap"]
    assert logs[1].price_source == "free"


async def test_a_soft_limit_warns_on_every_transport_shape_and_signals_once(user: Any) -> None:
    model = await sync_to_async(priced_model)("warned")
    chain = await sync_to_async(make_chain)(model=model, system_prompt="Be brief.")
    await Budget.objects.acreate(
        name="watch", period="month", limit=Decimal("0.0001"), soft_limit_percent=1, action="warn"
    )
    signals: list[dict[str, Any]] = []

    def receiver(**kwargs: Any) -> None:
        signals.append(kwargs)

    budget_warning.connect(receiver)
    try:
        outcome = await call_turn(chain.slug, user, "hi")
        assert [w["budget"] for w in outcome.budget_warnings] == ["watch"]
        stream = await stream_turn(chain.slug, user, "again")
        events = [event async for event in stream]
        warnings = [e for e in events if isinstance(e, BudgetWarningEvent)]
        assert len(warnings) == 1 and warnings[0].to_dict()["type"] == "budget_warning"
        assert events.index(warnings[0]) == 1  # right after start
        assert isinstance(events[-1], DoneEvent)
        assert events[-1].outcome.budget_warnings[0]["budget"] == "watch"
    finally:
        budget_warning.disconnect(receiver)
    assert [s["budget"] for s in signals] == ["watch"]  # once per period


async def test_a_budget_for_another_user_or_chain_does_not_apply(
    user: Any, django_user_model: Any
) -> None:
    other = await django_user_model.objects.acreate(username="bob")
    model = await sync_to_async(priced_model)("shared")
    chain = await sync_to_async(make_chain)(model=model)
    await Budget.objects.acreate(name="bob's", scope="user", user=other, limit=Decimal(0))
    await Budget.objects.acreate(name="other chain", scope="chain", limit=Decimal(0), chain=None)
    # "each chain" applies to this one: a zero limit refuses, before the turn runs.
    with pytest.raises(TurnError) as refused:
        await call_turn(chain.slug, user, "hi")
    assert "is used up" in refused.value.message
    await Budget.objects.filter(name="other chain").adelete()
    outcome = await call_turn(chain.slug, user, "hi")
    assert outcome.status == "ok"
    assert not [c async for c in BudgetCounter.objects.filter(budget__name="bob's")]


async def test_an_error_releases_the_reservation(user: Any) -> None:
    from advisors_app.core import ProviderUnavailableError
    from advisors_app.definition.runtime import load_chain

    model = await sync_to_async(priced_model)("failing")
    model.settings = {"responses": [], "repeat": False}
    await model.asave()
    chain = await sync_to_async(make_chain)(model=model)
    budget = await Budget.objects.acreate(name="daily", limit=Decimal(1))
    scripted = (await sync_to_async(load_chain)(chain.slug)).client.chat_model
    scripted.add(ProviderUnavailableError("down", status=503))
    with pytest.raises(ProviderUnavailableError):
        await call_turn(chain.slug, user, "hi")
    state = await BudgetCounter.objects.aget(budget=budget)
    assert state.reserved == 0
    assert state.spent == (await CallLog.objects.aget()).total_cost


async def test_a_block_budget_lets_the_cheaper_model_through_once_a_downgrade_is_reached(
    user: Any,
) -> None:
    """A user switched to the cheaper model is not refused by a block budget that the dearer
    model's worst case would pass but the cheaper one's fits (the reason to set a downgrade)."""
    model = await sync_to_async(priced_model)("dear", answer="From the dear model.")
    cheap = await sync_to_async(priced_model)("cheaper", answer="From the cheaper model.")
    await ModelPrice.objects.filter(chat_model=cheap).aupdate(
        input_per_million=Decimal("0.01"), output_per_million=Decimal("0.01")
    )
    chain = await sync_to_async(make_chain)(model=model, system_prompt="Be brief.")
    options = {"options": {"max_tokens": 300}}
    # The dear model's worst case: the prompt's bound and 300 answer tokens.
    one = (Decimal(PROMPT_TOKEN_FACTOR * prompt_tokens("hello")) + 2 * 300) / MILLION
    # Created first (a lower id): block budgets used to be checked before downgrade ones.
    block = await Budget.objects.acreate(name="block", period="day", limit=one * 2)
    await Budget.objects.acreate(
        name="switch", period="day", limit=one / 2, action="downgrade", downgrade_to=cheap
    )
    first = await call_turn(chain.slug, user, "hello", params=options)
    assert first.content == "From the cheaper model."
    [warning] = first.budget_warnings
    assert (warning["budget"], warning["downgraded_to"]) == ("switch", "cheaper")
    # Spend the block budget down to less than the dear call, more than the cheap one.
    await BudgetCounter.objects.filter(budget=block).aupdate(spent=one * 2 - one / 2)
    second = await call_turn(chain.slug, user, "hello", params=options)
    assert second.content == "From the cheaper model."


async def test_a_shared_budgets_warning_does_not_tell_what_others_spent(user: Any) -> None:
    model = await sync_to_async(priced_model)("together")
    chain = await sync_to_async(make_chain)(model=model)
    await Budget.objects.acreate(
        name="everyone", scope="global", limit=Decimal("0.0001"), soft_limit_percent=1
    )
    await Budget.objects.acreate(
        name="mine", scope="user", limit=Decimal("0.0001"), soft_limit_percent=1
    )
    few = {"options": {"max_tokens": 5}}
    outcome = await call_turn(chain.slug, user, "hi", params=few)
    warnings = {w["budget"]: w for w in outcome.budget_warnings}
    assert warnings["everyone"]["spent"] is None and warnings["everyone"]["percent"] > 0
    assert warnings["mine"]["spent"] is not None


async def test_an_absurd_price_is_capped_not_a_server_error(user: Any) -> None:
    model = await sync_to_async(priced_model)("absurd")
    await ModelPrice.objects.filter(chat_model=model).aupdate(
        input_per_million=Decimal("9999999999.9999999999"),
        output_per_million=Decimal("9999999999.9999999999"),
    )
    chain = await sync_to_async(make_chain)(model=model)
    await Budget.objects.acreate(name="watch", limit=Decimal(1), action="warn")
    outcome = await call_turn(chain.slug, user, "hi", params={"options": {"max_tokens": 100000}})
    assert outcome.status == "ok"
    assert (await BudgetCounter.objects.aget()).spent <= Decimal("999999999")
