"""Usage reports and budget standings (``advisors_app.costs.reports``) on real PostgreSQL: grouping,
exact sums per currency, unknown prices apart, local days, and where budgets stand."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from advisors_app.costs import reports as usage
from advisors_app.costs.budgets import period_bounds
from advisors_app.costs.reports import (
    budget_standings,
    budget_subject,
    local_range,
    subject_labels,
    subject_standings,
    total_row,
    usage_rows,
)
from advisors_app.models import Budget, BudgetCounter
from tests.cost_logs import log_call, priced_round
from tests.factories import make_chain

pytestmark = pytest.mark.django_db

D1 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
D2 = D1 + timedelta(days=1)
EVERYTHING = (datetime(2026, 10, 1, tzinfo=UTC), None)


@pytest.fixture
def people(django_user_model: Any) -> dict[str, Any]:
    return {
        name: django_user_model.objects.create_user(name, password="pw")
        for name in ("alice", "bob")
    }


@pytest.fixture
def logs(people: dict[str, Any]) -> None:
    alice, bob = people["alice"], people["bob"]
    log_call(
        alice,
        "support",
        D1,
        priced_round("gpt", 1000, 500, "0.001", "0.002"),
        priced_round("mini", 200, 100, "0.0000003", "0.0000006"),
    )
    log_call(alice, "support", D2, priced_round("gpt", 300, 0, None, None))
    # Rounds in two currencies: the log has no total, the report sums each currency.
    log_call(
        bob,
        "triage",
        D1,
        priced_round("euro", 10, 20, "0.1", "0.2", currency="EUR"),
        priced_round("gpt", 5, 5, "0.1", "0.2"),
    )
    log_call(bob, "triage", D1, priced_round("local", 70, 30, "0", "0", source="free"))
    # Logged before costs were recorded: tokens but no rounds, so never priced.
    log_call(bob, "triage", D2, usage={"prompt_tokens": 50, "completion_tokens": 25})
    # Refused before any model call: a call that cost nothing.
    log_call(alice, "support", D2, usage={})
    log_call(alice, "support", D1 - timedelta(days=20), priced_round("gpt", 1, 1, "5", "5"))


def as_dicts(rows: list[usage.UsageRow]) -> list[dict[str, Any]]:
    return [row.to_dict() for row in rows]


def test_by_day_sums_each_currency_exactly_and_counts_unknown_prices_apart(logs: None) -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    assert as_dicts(usage_rows("day", start, None)) == [
        {
            "key": "2026-11-02",
            "calls": 3,
            "prompt_tokens": 1000 + 200 + 10 + 5 + 70,
            "completion_tokens": 500 + 100 + 20 + 5 + 30,
            "cost": {"EUR": "0.3", "USD": "0.3030009"},
            "unknown_cost_calls": 0,
        },
        {
            "key": "2026-11-03",
            "calls": 3,
            "prompt_tokens": 300 + 50,
            "completion_tokens": 25,
            "cost": {},
            "unknown_cost_calls": 2,
        },
    ]


def test_by_chain_user_and_model(logs: None, people: dict[str, Any]) -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    by_chain = {row.key: row for row in usage_rows("chain", start, None)}
    assert set(by_chain) == {"support", "triage"}
    assert by_chain["support"].calls == 3
    assert by_chain["support"].cost == {"USD": Decimal("0.0030009")}
    assert by_chain["support"].unknown_cost_calls == 1
    assert by_chain["triage"].cost == {"EUR": Decimal("0.3"), "USD": Decimal("0.3")}
    by_user = {row.key: row for row in usage_rows("user", start, None)}
    assert set(by_user) == {str(people["alice"].pk), str(people["bob"].pk)}
    assert by_user[str(people["bob"].pk)].unknown_cost_calls == 1
    by_model = as_dicts(usage_rows("model", start, None))
    assert [row["key"] for row in by_model] == ["euro", "gpt", "local", "mini", None]
    gpt = by_model[1]
    # Three turns called gpt; one of them at an unknown price.
    assert (gpt["calls"], gpt["prompt_tokens"], gpt["unknown_cost_calls"]) == (3, 1305, 1)
    assert gpt["cost"] == {"USD": "0.303"}
    assert by_model[2]["cost"] == {} and by_model[2]["unknown_cost_calls"] == 0
    assert by_model[4] == {
        "key": None,
        "calls": 2,
        "prompt_tokens": 50,
        "completion_tokens": 25,
        "cost": {},
        "unknown_cost_calls": 1,
    }


def test_one_user_and_the_time_range(logs: None, people: dict[str, Any]) -> None:
    start, end = local_range(date(2026, 11, 2), date(2026, 11, 2))
    rows = usage_rows("chain", start, end, people["alice"].pk)
    assert as_dicts(rows) == [
        {
            "key": "support",
            "calls": 1,
            "prompt_tokens": 1200,
            "completion_tokens": 600,
            "cost": {"USD": "0.0030009"},
            "unknown_cost_calls": 0,
        }
    ]
    assert usage_rows("day", *local_range(date(2026, 12, 1), date(2026, 12, 31))) == []
    everything = usage_rows("day", *EVERYTHING)
    assert [row.key for row in everything] == ["2026-10-13", "2026-11-02", "2026-11-03"]


def test_sums_are_decimal_exact(people: dict[str, Any]) -> None:
    for _ in range(10):
        log_call(people["alice"], "support", D1, priced_round("gpt", 1, 1, "0.1", "0"))
    [row] = usage_rows("day", *EVERYTHING)
    assert row.cost == {"USD": Decimal("1")}
    assert row.to_dict()["cost"] == {"USD": "1"}


def test_days_are_the_current_time_zones(people: dict[str, Any]) -> None:
    late = datetime(2026, 11, 2, 23, 30, tzinfo=UTC)
    log_call(people["alice"], "support", late, priced_round("gpt", 1, 1, "1", "1"))
    assert [row.key for row in usage_rows("day", *EVERYTHING)] == ["2026-11-02"]
    with timezone.override("Europe/Paris"):
        assert [row.key for row in usage_rows("day", *EVERYTHING)] == ["2026-11-03"]
        start, end = local_range(date(2026, 11, 3), date(2026, 11, 3))
        assert start == datetime(2026, 11, 2, 23, 0, tzinfo=UTC)
        assert len(usage_rows("day", start, end)) == 1


def test_total_row_and_range_edges(logs: None) -> None:
    total = total_row(usage_rows("day", datetime(2026, 11, 1, tzinfo=UTC), None))
    assert (total.calls, total.unknown_cost_calls) == (6, 2)
    assert total.cost == {"EUR": Decimal("0.3"), "USD": Decimal("0.3030009")}
    assert local_range(date(2026, 1, 1), date.max)[1] is None
    with pytest.raises(ValueError, match="use one of day, chain, user, model"):
        usage_rows("week", *EVERYTHING)


# -- budget standings -----------------------------------------------------------------------


def budget(**fields: Any) -> Budget:
    values = {"name": "b", "limit": Decimal("1"), "period": "day", **fields}
    return Budget.objects.create(**values)


def test_a_named_subjects_budget_shows_what_is_left_and_the_reset(people: dict[str, Any]) -> None:
    now = timezone.now()
    alice = people["alice"]
    named = budget(scope="user", user=alice, limit=Decimal("0.5"))
    start, end = period_bounds("day", now)
    BudgetCounter.objects.create(
        budget=named,
        subject=f"user:{alice.pk}",
        period_start=start,
        spent=Decimal("0.2"),
        reserved=Decimal("0.05"),
    )
    everyone = budget(scope="global", period="total", limit=Decimal("10"))
    BudgetCounter.objects.create(
        budget=everyone, subject="global", period_start=start - timedelta(days=400), spent=10
    )
    # A counter of an earlier period holds nothing for this one.
    stale = budget(scope="user", user=people["bob"])
    BudgetCounter.objects.create(
        budget=stale,
        subject=f"user:{people['bob'].pk}",
        period_start=start - timedelta(days=1),
        spent=Decimal("0.9"),
    )
    found = budget_standings([named, everyone, stale], now)
    standing = found[named.pk].single
    assert standing is not None
    assert (standing.spent, standing.reserved, standing.remaining) == (
        Decimal("0.2"),
        Decimal("0.05"),
        Decimal("0.25"),
    )
    assert found[named.pk].reset_at == end
    assert found[everyone.pk].reset_at is None
    assert found[everyone.pk].single.remaining == Decimal("0")  # type: ignore[union-attr]
    assert found[stale.pk].single.remaining == Decimal("1")  # type: ignore[union-attr]


def test_an_each_users_budget_counts_subjects_and_finds_the_tightest(
    people: dict[str, Any],
) -> None:
    now = timezone.now()
    start, _ = period_bounds("day", now)
    each = budget(scope="user")
    for person, spent in ((people["alice"], "0.3"), (people["bob"], "0.9")):
        BudgetCounter.objects.create(
            budget=each, subject=f"user:{person.pk}", period_start=start, spent=Decimal(spent)
        )
    BudgetCounter.objects.create(
        budget=each, subject="user:999", period_start=start - timedelta(days=3), spent=1
    )
    found = budget_standings([each], now)[each.pk]
    assert found.single is None and found.subjects == 2
    assert found.tightest is not None
    assert found.tightest.subject == f"user:{people['bob'].pk}"
    assert found.tightest.remaining == Decimal("0.1")
    listed = subject_standings(each, now)
    assert [s.remaining for s in listed] == [Decimal("0.1"), Decimal("0.7")]
    assert budget_standings([budget(scope="chain")], now)  # nobody spent: no tightest


def test_subjects_and_their_labels(people: dict[str, Any]) -> None:
    chain = make_chain("support")
    group = Group.objects.create(name="staff")
    alice = people["alice"]
    assert budget_subject(Budget(scope="user", user=alice)) == f"user:{alice.pk}"
    assert budget_subject(Budget(scope="user")) is None
    assert budget_subject(Budget(scope="group", group=group)) == f"group:{group.pk}"
    assert budget_subject(Budget(scope="tenant", tenant="acme")) == "tenant:acme"
    assert budget_subject(Budget(scope="tenant")) is None
    assert budget_subject(Budget(scope="chain", chain=chain)) == f"chain:{chain.pk}"
    assert budget_subject(Budget(scope="global")) == "global"
    subjects = [f"user:{alice.pk}", "user:9999", f"group:{group.pk}", f"chain:{chain.pk}"]
    assert subject_labels([*subjects, "tenant:acme", "global"]) == {
        f"user:{alice.pk}": "user alice",
        "user:9999": "user 9999 (deleted)",
        f"group:{group.pk}": "group staff",
        f"chain:{chain.pk}": "chain support",
        "tenant:acme": "tenant acme",
        "global": "everyone",
    }


def test_exported_members() -> None:
    assert len(set(usage.__all__)) == len(usage.__all__)
    for name in usage.__all__:
        assert hasattr(usage, name), name
