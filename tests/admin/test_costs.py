"""Admin of costs: model prices, budgets with what is left and when it resets, cost columns of
chat models and call logs (unknown flagged, never 0), and the spend report."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission
from django.test import Client
from django.utils import timezone

from advisors_app.costs.budgets import clear_budget_cache, period_bounds
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.models import Budget, BudgetCounter, ChatModelConfig, ModelPrice
from tests.cost_logs import log_call, priced_round
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db
FLAG = 'class="cost-unknown"'


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    clear_price_cache()
    clear_budget_cache()
    yield
    clear_price_cache()
    clear_budget_cache()


def staff_with(django_user_model: Any, name: str, *codenames: str) -> Client:
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


# -- model prices ---------------------------------------------------------------------------


def price_form(**fields: Any) -> dict[str, Any]:
    return {
        "chat_model": "",
        "model_pattern": "",
        "valid_from_0": "2026-11-01",
        "valid_from_1": "00:00:00",
        "input_per_million": "2.5",
        "output_per_million": "10",
        "cached_input_per_million": "",
        "currency": "USD",
        "note": "",
        **fields,
    }


def test_model_prices_list_and_refuse_both_or_neither_target(admin_client: Client) -> None:
    model = scripted_model("gpt")
    url = "/admin/advisors_app/modelprice/add/"
    for fields in ({}, {"chat_model": model.pk, "model_pattern": "gpt-4o*"}):
        response = admin_client.post(url, price_form(**fields))
        assert response.status_code == 200
        errors = response.context["adminform"].form.errors
        assert errors["model_pattern"] == [
            "Give either a chat-model configuration or a model-name pattern."
        ]
    assert admin_client.post(url, price_form(model_pattern="gpt-4o*")).status_code == 302
    assert admin_client.post(url, price_form(chat_model=model.pk)).status_code == 302
    assert ModelPrice.objects.count() == 2
    listing = admin_client.get("/admin/advisors_app/modelprice/").content.decode()
    assert "models <code>gpt-4o*</code>" in listing
    assert "chat model <strong>gpt</strong>" in listing
    assert "2.5000000000" in listing and "USD" in listing


# -- budgets --------------------------------------------------------------------------------


@pytest.fixture
def budgets(django_user_model: Any) -> dict[str, Any]:
    alice = django_user_model.objects.create_user("alice", password="pw")
    bob = django_user_model.objects.create_user("bob", password="pw")
    start, end = period_bounds("day")
    named = Budget.objects.create(name="alice daily", user=alice, limit=Decimal("0.5"))
    BudgetCounter.objects.create(
        budget=named,
        subject=f"user:{alice.pk}",
        period_start=start,
        spent=Decimal("0.2"),
        reserved=Decimal("0.05"),
    )
    each = Budget.objects.create(name="per user", limit=Decimal("1"))
    for person, spent in ((alice, "0.25"), (bob, "1.2")):
        BudgetCounter.objects.create(
            budget=each, subject=f"user:{person.pk}", period_start=start, spent=Decimal(spent)
        )
    total = Budget.objects.create(
        name="all time", scope="global", period="total", limit=Decimal("100"), currency="EUR"
    )
    return {"named": named, "each": each, "total": total, "end": end, "bob": bob}


def test_budgets_list_shows_what_is_left_and_when_it_resets(
    admin_client: Client, budgets: dict[str, Any]
) -> None:
    listing = admin_client.get("/admin/advisors_app/budget/")
    assert listing.status_code == 200
    page = listing.content.decode()
    reset = timezone.localtime(budgets["end"]).strftime("%Y-%m-%d %H:%M")
    assert "user alice" in page and "each user" in page and "everyone" in page
    assert "0.25 USD" in page  # alice: 0.5 - 0.2 spent - 0.05 reserved
    assert reset in page
    # Each user: two spent; bob ran over (a warn budget can), flagged.
    assert "2 subjects spent; least left:" in page
    assert f"{FLAG}" in page and "(over by 0.2)" in page and "(user bob)" in page
    assert "100 EUR" in page and "never" in page


def test_a_budget_page_lists_each_subjects_spend_this_period(
    admin_client: Client, budgets: dict[str, Any]
) -> None:
    each = budgets["each"]
    start, _ = period_bounds("day")
    BudgetCounter.objects.create(
        budget=each, subject="user:999999", period_start=start - timedelta(days=2), spent=5
    )
    page = admin_client.get(f"/admin/advisors_app/budget/{each.pk}/change/").content.decode()
    table = page[page.index('class="budget-standings"') :]
    assert table.index("user bob") < table.index("user alice")  # the least left first
    assert "0.75 USD" in table  # alice
    assert "user 999999" not in table  # an earlier period's counter
    named = budgets["named"]
    page = admin_client.get(f"/admin/advisors_app/budget/{named.pk}/change/").content.decode()
    assert "0.05 USD" in page and "0.25 USD" in page


def budget_form(**fields: Any) -> dict[str, Any]:
    return {
        "name": "b",
        "enabled": "on",
        "scope": "user",
        "user": "",
        "group": "",
        "tenant": "",
        "chain": "",
        "period": "day",
        "limit": "0.5",
        "currency": "USD",
        "soft_limit_percent": "80",
        "action": "block",
        "downgrade_to": "",
        **fields,
    }


def test_the_budget_form_shows_the_models_errors(admin_client: Client) -> None:
    url = "/admin/advisors_app/budget/add/"
    group = Group.objects.create(name="staff")
    chain = make_chain("support")
    cheap = scripted_model("cheap")
    cases = [
        ({"scope": "group"}, "group", "A group budget names its group."),
        ({"scope": "user", "chain": chain.pk}, "chain", "Only a chain budget names a chain."),
        ({"action": "downgrade"}, "downgrade_to", "A downgrade budget names the cheaper"),
        ({"downgrade_to": cheap.pk}, "downgrade_to", "Only a downgrade budget switches"),
    ]
    for fields, field, message in cases:
        response = admin_client.post(url, budget_form(**fields))
        assert response.status_code == 200, fields
        assert message in response.context["adminform"].form.errors[field][0]
    response = admin_client.post(url, budget_form(scope="group", group=group.pk))
    assert response.status_code == 302
    assert Budget.objects.get().group == group


# -- chat models and call logs --------------------------------------------------------------


def test_chat_models_show_their_pricing_and_flag_an_unknown_price(admin_client: Client) -> None:
    scripted_model("local")
    ChatModelConfig.objects.create(
        slug="mystery", provider="openai", model="mystery-1", pricing="manual"
    )
    priced = ChatModelConfig.objects.create(
        slug="priced", provider="openai", model="x", pricing="manual"
    )
    ModelPrice.objects.create(
        chat_model=priced, input_per_million=Decimal("1.5"), output_per_million=Decimal("6")
    )
    listing = admin_client.get("/admin/advisors_app/chatmodelconfig/").content.decode()
    rows = {
        slug: row
        for slug, row in re.findall(r">(local|mystery|priced)</a>(.*?)</tr>", listing, re.S)
    }
    assert ">free<" in rows["local"]
    assert FLAG in rows["mystery"] and ">unknown<" in rows["mystery"]
    assert "admin price: 1.5 / 6 USD" in rows["priced"]
    page = admin_client.get(f"/admin/advisors_app/chatmodelconfig/{priced.pk}/change/")
    assert "pricing" in page.context["adminform"].form.fields


def test_call_logs_show_the_cost_and_flag_an_unknown_price(
    admin_client: Client, admin_user: Any
) -> None:
    now = timezone.now()
    priced = log_call(
        admin_user,
        "support",
        now,
        priced_round("gpt", 1000, 500, "0.001", "0.002"),
        priced_round("mini", 10, 5, "0.00001", "0.00002"),
    )
    unknown = log_call(admin_user, "support", now, priced_round("gpt", 10, 5, None, None))
    free = log_call(
        admin_user, "support", now, priced_round("local", 9, 9, "0", "0", source="free")
    )
    listing = admin_client.get("/admin/advisors_app/calllog/")
    admin = listing.context["cl"].model_admin
    assert admin.cost(priced) == "0.00303 USD"
    assert FLAG in admin.cost(unknown) and ">unknown<" in admin.cost(unknown)
    assert admin.cost(free) == "0 (free)"
    assert listing.content.decode().count(FLAG) == 1
    filtered = admin_client.get("/admin/advisors_app/calllog/?price_source__exact=unknown")
    assert list(filtered.context["cl"].queryset) == [unknown]
    page = admin_client.get(f"/admin/advisors_app/calllog/{priced.pk}/change/").content.decode()
    table = page[page.index('class="cost-rounds"') :]
    assert "0.001 USD" in table and "mini-name" in table and "0.00002 USD" in table
    page = admin_client.get(f"/admin/advisors_app/calllog/{unknown.pk}/change/").content.decode()
    assert FLAG in page[page.index('class="cost-rounds"') :]


# -- the spend report -----------------------------------------------------------------------

REPORT = "/admin/advisors_app/calllog/report/"


@pytest.fixture
def spending(budgets: dict[str, Any], admin_user: Any) -> dict[str, Any]:
    today = timezone.now()
    bob = budgets["bob"]
    log_call(admin_user, "support", today, priced_round("gpt", 1000, 500, "0.001", "0.002"))
    log_call(bob, "triage", today - timedelta(days=1), priced_round("mini", 10, 5, "0.1", "0.2"))
    log_call(bob, "triage", today - timedelta(days=1), priced_round("gpt", 10, 5, None, None))
    log_call(bob, "triage", today - timedelta(days=40), priced_round("gpt", 1, 1, "7", "7"))
    log_call(bob, "partner", today - timedelta(days=2), priced_round("p1", 3, 3, None, None))
    return {"today": timezone.localdate()}


def chart_data(page: str) -> dict[str, Any]:
    found = re.search(
        r'<script id="spend-by-day-data" type="application/json">(.*?)</script>', page, re.S
    )
    assert found is not None
    return json.loads(found.group(1))


def test_the_spend_report_draws_spend_by_day_and_tables(
    admin_client: Client, spending: dict[str, Any]
) -> None:
    response = admin_client.get(REPORT)
    assert response.status_code == 200
    page = response.content.decode()
    today = spending["today"]
    chart = chart_data(page)
    assert len(chart["labels"]) == 30
    assert chart["labels"][-1] == today.isoformat()
    [usd] = chart["datasets"]
    assert usd["label"] == "USD"
    assert usd["data"][-1] == pytest.approx(0.003) and usd["data"][-2] == pytest.approx(0.3)
    assert chart["unknown"][-2] == 1
    assert "vendor/chart.js/chart.umd.min.js" in page and "advisors_app/spend-report.js" in page
    assert "0.303 USD" in page  # the range's total; the call 40 days ago is not in it
    assert "2 calls with unknown price" in page
    [shown] = re.findall(r'<a href="([^"]*)">Show them</a>', page)
    unknown = admin_client.get(shown.replace("&amp;", "&"))
    assert {log.chain_slug for log in unknown.context["cl"].queryset} == {"triage", "partner"}
    context = response.context
    assert [(r["name"], r["calls"]) for r in context["by_user"]] == [("bob", 3), ("admin", 1)]
    assert [(r["name"], r["cost"]) for r in context["by_chain"]] == [
        ("triage", "0.3 USD"),
        ("support", "0.003 USD"),
        ("partner", "-"),  # nothing priced: no sum, not a zero
    ]
    assert [(r["name"], r["cost"]) for r in context["by_model"]] == [
        ("mini", "0.3 USD"),
        ("gpt", "0.003 USD"),
        ("p1", "-"),
    ]
    assert [(r["name"], r["unknown"]) for r in context["by_model"]] == [
        ("mini", 0),
        ("gpt", 1),
        ("p1", 1),
    ]
    assert context["by_chain"][0]["url"].endswith("?chain_slug__exact=triage")
    for row in context["by_user"] + context["by_day"]:
        assert admin_client.get(row["url"]).status_code == 200
    # The budgets where they stand.
    budgets = page[page.index('class="spend-budgets"') :]
    assert "alice daily" in budgets and "0.25 USD" in budgets and "never" in budgets


def test_the_spend_report_takes_a_date_range(
    admin_client: Client, spending: dict[str, Any]
) -> None:
    today = spending["today"]
    one_day = {"from": today.isoformat(), "to": today.isoformat()}
    response = admin_client.get(REPORT, one_day)
    assert [r["name"] for r in response.context["by_chain"]] == ["support"]
    assert chart_data(response.content.decode())["labels"] == [today.isoformat()]
    backwards = {"from": today.isoformat(), "to": (today - timedelta(days=1)).isoformat()}
    response = admin_client.get(REPORT, backwards)
    assert "From is after To." in response.content.decode()
    assert "total" not in response.context
    too_long = {"from": "2020-01-01", "to": "2026-01-01"}
    assert "Choose at most 366 days." in admin_client.get(REPORT, too_long).content.decode()
    assert admin_client.get(REPORT, {"from": "nope", "to": ""}).status_code == 200


def test_the_spend_report_is_for_staff_who_may_view_call_logs(
    django_user_model: Any, spending: dict[str, Any], client: Client
) -> None:
    assert client.get(REPORT).status_code == 302  # to the admin's login
    assert staff_with(django_user_model, "bare").get(REPORT).status_code == 403
    logs_only = staff_with(django_user_model, "auditor", "view_calllog")
    response = logs_only.get(REPORT)
    assert response.status_code == 200
    assert 'class="spend-budgets"' not in response.content.decode()  # no budget permission
    both = staff_with(django_user_model, "finance", "view_calllog", "view_budget")
    assert 'class="spend-budgets"' in both.get(REPORT).content.decode()


def test_the_report_is_linked_from_the_call_logs_and_the_apps_admin_page(
    admin_client: Client, django_user_model: Any
) -> None:
    for url in ("/admin/advisors_app/calllog/", "/admin/advisors_app/"):
        assert f'href="{REPORT}"' in admin_client.get(url).content.decode(), url
    budgets_only = staff_with(django_user_model, "planner", "view_budget")
    assert f'href="{REPORT}"' not in budgets_only.get("/admin/advisors_app/").content.decode()
