"""A block budget never ends above its limit when the provider counts more tokens than the
``cl100k_base`` estimate (issue 36, item 2): a reservation is a bound the provider's count stays
within — the model's own count where it has one, the estimate × ``PROMPT_TOKEN_FACTOR``
otherwise — and a round counted above its reservation is booked before the next may reserve.
On real PostgreSQL, with a real OpenAI-compatible server on loopback as the provider."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from decimal import Decimal
from functools import partial
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.db import connection

from advisors_app.core import Usage
from advisors_app.core.context_window import estimate_prompt_tokens
from advisors_app.core.exceptions import BudgetExceededError
from advisors_app.core.messages import SystemMessage, UserMessage
from advisors_app.core.prompt import ChatOptions, Prompt
from advisors_app.core.testing import tool_call_response
from advisors_app.costs.budgets import applicable_budgets, clear_budget_cache
from advisors_app.costs.metering import PROMPT_TOKEN_FACTOR, TurnMeter
from advisors_app.costs.pricing import ModelRef, clear_price_cache, price_book
from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.exceptions import TurnError
from advisors_app.models import Budget, BudgetCounter, CallLog, ChatModelConfig, ModelPrice
from advisors_app.turn import call_turn
from tests.core.providers.openai_server import Completion, ScriptedOpenAiServer
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)
MILLION = Decimal(1_000_000)
#: Input at 1000 per million tokens, output free: a call's cost is its prompt's.
INPUT_PRICE = Decimal(1000)


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


@pytest.fixture
def openai_server() -> Iterator[ScriptedOpenAiServer]:
    server = ScriptedOpenAiServer()
    yield server
    server.stop()


def run_concurrently(count: int, turn: Any) -> list[str]:
    """``turn()`` on ``count`` threads started together (each with its own event loop and
    database connection): ``"ok"`` or how each was refused."""
    results: list[str] = []
    start = threading.Barrier(count)

    def run() -> None:
        start.wait()
        try:
            async_to_sync(turn)()
            results.append("ok")
        except TurnError as refused:
            results.append(refused.code)
        except Exception as exc:  # refused inside the chain
            results.append(type(exc).__name__)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_twenty_concurrent_turns_on_a_provider_counting_three_times_the_estimate_stay_within(
    user: Any, openai_server: ScriptedOpenAiServer
) -> None:
    estimate = estimate_prompt_tokens(
        Prompt([SystemMessage("Be brief."), UserMessage("same question")])
    )
    counted = 3 * estimate  # a tokenizer that reads digits one by one, say
    usage = {"prompt_tokens": counted, "completion_tokens": 1, "total_tokens": counted + 1}
    openai_server.add(*(Completion("ok", usage=usage) for _ in range(20)))
    model = ChatModelConfig.objects.create(
        slug="counting",
        provider="openai",
        model="counting-model",
        base_url=openai_server.base_url,
        pricing="manual",
    )
    ModelPrice.objects.create(
        chat_model=model, input_per_million=INPUT_PRICE, output_per_million=Decimal(0)
    )
    chain = make_chain(model=model, system_prompt="Be brief.")
    estimated_call = estimate * INPUT_PRICE / MILLION
    budget = Budget.objects.create(name="daily", period="day", limit=estimated_call * 7)

    results = run_concurrently(20, partial(call_turn, chain.slug, user, "same question"))

    state = BudgetCounter.objects.get(budget=budget)
    assert state.spent <= budget.limit and state.reserved == 0
    # Each call is reserved at what the provider counts, so two fit in seven estimated
    # calls, whatever the interleaving (the estimate alone let three or more through).
    assert results.count("ok") == 2, results
    assert set(results) <= {"ok", "budget_exceeded", "BudgetExceededError"}
    assert state.spent == 2 * counted * INPUT_PRICE / MILLION
    assert sum(log.total_cost for log in CallLog.objects.filter(status="ok")) == state.spent
    # The provider was sent the prompt the estimate was made of.
    assert openai_server.bodies[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "same question"},
    ]


class SelfCountingModel:
    """A chat model that counts its prompt as its provider will: twice the estimate."""

    default_options = ChatOptions(max_tokens=10)
    context_window = None

    async def count_prompt_tokens(self, prompt: Prompt) -> int:
        return 2 * estimate_prompt_tokens(prompt)


async def test_a_model_that_counts_its_prompt_is_reserved_at_its_count(user: Any) -> None:
    await ModelPrice.objects.acreate(
        model_pattern="self-counting",
        input_per_million=INPUT_PRICE,
        output_per_million=Decimal(0),
    )
    budget = await Budget.objects.acreate(name="daily", period="day", limit=Decimal(1))
    model = SelfCountingModel()
    ref = ModelRef("self-counting", "custom", "self-counting")
    budgets = await sync_to_async(applicable_budgets)(user, None, lambda: None)
    meter = TurnMeter({id(model): ref}, await sync_to_async(price_book)(fresh=True), budgets, user)
    prompt = Prompt([SystemMessage("Be brief."), UserMessage("What is 1234567 + 7654321?")])
    counted = await model.count_prompt_tokens(prompt)

    call = await meter.admit(model, prompt)  # type: ignore[arg-type]

    state = await BudgetCounter.objects.aget(budget=budget)
    assert state.reserved == counted * INPUT_PRICE / MILLION  # its count, not the factor's
    assert counted < PROMPT_TOKEN_FACTOR * estimate_prompt_tokens(prompt)
    call.finished(Usage(counted, 3), ["Eight million."], completed=True)
    await sync_to_async(meter.settle)()
    state = await BudgetCounter.objects.aget(budget=budget)
    assert (state.spent, state.reserved) == (counted * INPUT_PRICE / MILLION, 0)


def test_a_round_counted_above_its_reservation_is_booked_before_the_next_may_reserve(
    user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider counting far more than any bound (text it adds that we never see): the
    excess is booked, the turn's tool round refused, and the next turn refused before it
    runs — the overrun is contained to the rounds already running."""
    model = scripted_model("hidden-prompt", responses=(), repeat=False)
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    chain = make_chain("tools", model=model, advisors=(("tool_calling", {}),), tools=["calculator"])
    round_ = tool_call_response(("calculator", {"expression": "6 * 7"}), usage=Usage(5000, 10))
    load_chain(chain.slug).client.chat_model.add(round_, "It is 42.")
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal("0.002"))
    few = {"options": {"max_tokens": 100}}

    with (
        caplog.at_level(logging.WARNING, logger="advisors_app.costs.metering"),
        pytest.raises(BudgetExceededError),
    ):
        async_to_sync(call_turn)(chain.slug, user, "What is 6 * 7?", params=few)

    assert "more than the" in caplog.text and "5000 prompt tokens" in caplog.text
    assert len(load_chain(chain.slug).client.chat_model.prompts) == 1  # no second call
    log = CallLog.objects.get()
    state = BudgetCounter.objects.get(budget=budget)
    assert (state.spent, state.reserved) == (log.total_cost, 0)
    assert state.spent == (5000 * 1 + 10 * 2) / MILLION
    with pytest.raises(TurnError) as refused:
        async_to_sync(call_turn)(chain.slug, user, "And 7 * 8?", params=few)
    assert refused.value.code == "budget_exceeded" and "is used up" in refused.value.message
