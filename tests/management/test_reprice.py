"""``manage.py reprice``: stored call-log costs recomputed after a price fix, on real PostgreSQL.

Logs come from real turns (the turn service on a scripted model) or, for a provider the tests
cannot call, are written as the service writes them.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import CommandError, call_command
from django.utils import timezone

from advisors_app.costs.budgets import clear_budget_cache
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import Budget, BudgetCounter, CallLog, ChatModelConfig, ModelPrice
from advisors_app.turn import call_turn
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)
MILLION = Decimal(1_000_000)
LONG_AGO = datetime(2020, 1, 1, tzinfo=UTC)
COSTS = ("input_cost", "output_cost", "total_cost", "currency", "price_source", "cost_rounds")


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
def unpriced() -> ChatModelConfig:
    """A scripted model priced by admin prices only, and none yet: its calls cost unknown."""
    model = scripted_model("unpriced", responses=("Fine.",))
    model.pricing = "manual"
    model.save()
    return model


def reprice(*args: str) -> str:
    out = io.StringIO()
    call_command("reprice", *args, stdout=out)
    return out.getvalue()


def turn(chain: Any, user: Any, message: str = "How much is this?") -> CallLog:
    outcome = async_to_sync(call_turn)(chain.slug, user, message)
    return CallLog.objects.get(trace_id=outcome.trace_id)


def costs(log: CallLog) -> dict[str, Any]:
    log.refresh_from_db()
    return {name: getattr(log, name) for name in COSTS}


def made_at(log: CallLog, when: datetime) -> CallLog:
    CallLog.objects.filter(pk=log.pk).update(created=when)
    log.refresh_from_db()
    return log


def price(model: ChatModelConfig, valid_from: datetime = LONG_AGO, **amounts: int) -> ModelPrice:
    return ModelPrice.objects.create(
        chat_model=model,
        valid_from=valid_from,
        input_per_million=Decimal(amounts.get("input", 1)),
        output_per_million=Decimal(amounts.get("output", 2)),
    )


def test_a_price_fix_turns_unknown_costs_into_what_the_service_would_store(
    user: Any, unpriced: ChatModelConfig
) -> None:
    chain = make_chain(model=unpriced, system_prompt="Be brief.")
    logs = [turn(chain, user), turn(chain, user)]
    assert [(log.total_cost, log.price_source) for log in logs] == [(None, "unknown")] * 2
    assert logs[0].cost_rounds[0]["input_cost"] is None
    price(unpriced)
    # The same turn once the price exists: what repricing must arrive at.
    priced = costs(turn(chain, user))
    assert priced["total_cost"] > 0 and priced["price_source"] == "override"

    output = reprice("--since", logs[0].created.date().isoformat(), "--batch-size", "1")

    assert output.splitlines()[0].startswith("2 of 3 call logs created from ")
    assert output.splitlines()[0].endswith(" changed.")
    total = priced["total_cost"]
    assert output.splitlines()[1:] == [
        f"Total before: {total.normalize():f} USD; 2 with an unknown price.",
        f"Total after: {(total * 3).normalize():f} USD; 0 with an unknown price.",
    ]
    for log in logs:
        assert costs(log) == priced
    (round_,) = priced["cost_rounds"]
    assert round_["price_source"] == "override" and round_["currency"] == "USD"
    assert Decimal(round_["input_cost"]) == Decimal(round_["prompt_tokens"]) / MILLION
    # Nothing left to change.
    assert reprice("--since", "2020-01-01").startswith("0 of 3 call logs")


def test_each_log_is_priced_at_its_own_time_and_budgets_are_left_alone(
    user: Any, unpriced: ChatModelConfig
) -> None:
    chain = make_chain(model=unpriced, system_prompt="Be brief.")
    old, new = turn(chain, user), turn(chain, user)
    now = timezone.now()
    made_at(old, now - timedelta(days=3))
    price(unpriced, input=1, output=2)
    price(unpriced, valid_from=now - timedelta(days=1), input=10, output=20)
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal(1))
    counter = BudgetCounter.objects.create(
        budget=budget, subject=f"user:{user.pk}", period_start=now, spent=Decimal("0.5")
    )

    reprice("--since", (now - timedelta(days=7)).isoformat())

    old_cost, new_cost = costs(old)["total_cost"], costs(new)["total_cost"]
    assert old_cost is not None and new_cost == old_cost * 10  # the newer price for the newer log
    counter.refresh_from_db()
    assert (counter.spent, counter.reserved) == (Decimal("0.5"), 0)


def test_dry_run_writes_nothing(user: Any, unpriced: ChatModelConfig) -> None:
    chain = make_chain(model=unpriced)
    log = turn(chain, user)
    before = costs(log)
    price(unpriced)
    output = reprice("--since", "2020-01-01", "--dry-run")
    assert output.splitlines()[0].endswith(" would change (dry run: nothing written).")
    assert output.splitlines()[0].startswith("1 of 1 call logs")
    assert "0 with an unknown price" in output.splitlines()[2]
    assert costs(log) == before


def test_since_until_and_chain_bound_what_is_repriced(user: Any, unpriced: ChatModelConfig) -> None:
    chain = make_chain(model=unpriced)
    other = make_chain("other", model=unpriced)
    day = timezone.make_aware(datetime(2026, 11, 1))
    first, second, third = (made_at(turn(chain, user), day + timedelta(days=n)) for n in range(3))
    elsewhere = made_at(turn(other, user), day + timedelta(days=1, hours=1))
    price(unpriced)

    output = reprice("--since", "2026-11-02", "--until", "2026-11-03", "--chain", "support")

    assert output.startswith("1 of 1 call logs of chain 'support' created from 2026-11-02")
    assert [costs(log)["price_source"] for log in (first, second, third, elsewhere)] == [
        "unknown",
        "override",
        "unknown",
        "unknown",
    ]
    # A date and time, in the site's time zone without an offset; --until is exclusive.
    reprice("--since", "2026-11-02T00:30", "--until", "2026-11-02T01:00")
    assert costs(elsewhere)["price_source"] == "unknown"
    reprice("--since", "2026-11-02T01:00:00+00:00")
    assert [costs(log)["price_source"] for log in (first, third, elsewhere)] == [
        "unknown",
        "override",
        "override",
    ]


def test_the_base_url_comes_from_the_configuration(user: Any, settings: Any) -> None:
    """Rounds keep no base URL: the alias's gives genai-prices the provider (Groq here)."""
    settings.ADVISORS = {
        "CHAT_MODELS": {
            "groq": {
                "provider": "openai",
                "model": "llama-3.3-70b-versatile",
                "base_url": "https://api.groq.com/openai/v1",
            }
        }
    }
    round_ = {
        "model_config": "groq",
        "provider": "openai",
        "model": "llama-3.3-70b-versatile",
        "prompt_tokens": 1000,
        "completion_tokens": 500,
        "cached_prompt_tokens": 0,
        "estimated": False,
        "input_cost": None,
        "output_cost": None,
        "currency": "",
        "price_source": "unknown",
    }
    log = CallLog.objects.create(
        chain_slug="support",
        trace_id=uuid.uuid4().hex,
        mode="call",
        status="ok",
        latency=0.1,
        price_source="unknown",
        cost_rounds=[round_],
    )
    reprice("--since", "2020-01-01")
    repriced = costs(log)
    assert (repriced["price_source"], repriced["currency"]) == ("genai-prices", "USD")
    # Groq's llama-3.3-70b-versatile: 0.59 in, 0.79 out per million tokens.
    assert repriced["total_cost"] == (1000 * Decimal("0.59") + 500 * Decimal("0.79")) / MILLION
    assert repriced["cost_rounds"][0]["output_cost"] == "0.000395"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--since", "yesterday"), "--since 'yesterday' is not a date: give an ISO date"),
        (("--since", "2026-02-30"), "--since '2026-02-30' is not a date"),
        (("--since", "2026-11-01", "--until", "11/05/2026"), "--until '11/05/2026' is not a"),
        (("--since", "2026-11-05", "--until", "2026-11-01"), "must be after --since"),
    ],
)
def test_a_bad_date_names_the_format(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError) as refused:
        reprice(*args)
    assert message in str(refused.value)
    if "not a date" in message:
        assert "(2026-11-01)" in str(refused.value)
