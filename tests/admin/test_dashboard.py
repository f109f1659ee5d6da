"""The admin's dashboard: figures per day, chain and version from one query, filters, access."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from advisors_app.admin.dashboard import dashboard_figures
from advisors_app.costs.reports import local_range
from advisors_app.models import ChainVersion
from tests.cost_logs import log_call, priced_round
from tests.factories import make_chain

pytestmark = pytest.mark.django_db

URL = "/admin/advisors_app/advisorchain/dashboard/"


def turn(user, chain, created, *rounds, **fields):
    """A call log as :func:`tests.cost_logs.log_call` writes it, with its outcome and timings
    (``status``, ``mode``, ``latency``, ...) set from ``fields``."""
    log = log_call(user, chain, created, *rounds)
    for name, value in fields.items():
        setattr(log, name, value)
    log.save()
    return log


@pytest.fixture
def logs(django_user_model):
    """Seven turns over two days on two chains (support v1 and its draft, triage v1)."""
    user = django_user_model.objects.create_user("u")
    support = make_chain("support")
    make_chain("triage")
    v1 = ChainVersion.objects.get(chain=support, number=1)
    now = timezone.now().replace(hour=12)
    earlier = now - timedelta(days=2)
    paid = priced_round("gpt", 100, 20, "0.01", "0.02")
    for latency in (0.1, 0.2, 0.3, 0.4):
        turn(user, "support", now, paid, latency=latency, chain_version=v1)
    turn(user, "support", now, status="error", latency=2.0, label="draft")
    turn(
        user,
        "support",
        earlier,
        paid,
        latency=1.0,
        mode="stream",
        time_to_first_token=0.25,
        finish_reason="CONTENT_FILTER",
        chain_version=v1,
    )
    turn(user, "triage", earlier, priced_round("gpt", 10, 5, None, None), latency=3.0)
    return {"now": now, "earlier": earlier}


def test_figures_come_from_one_query_with_percentiles(logs) -> None:
    start, end = local_range(logs["earlier"].date(), logs["now"].date())
    with CaptureQueriesContext(connection) as queries:
        found = dashboard_figures(start, end)
    assert len(queries) == 1
    total = found["total"]
    assert (total.turns, total.errors, total.refusals) == (7, 1, 1)
    assert total.latency_p50 == pytest.approx(0.4)
    assert total.ttft_p50 == pytest.approx(0.25) and total.ttft_p95 == pytest.approx(0.25)
    assert total.prompt_tokens == 5 * 100 + 10 and total.completion_tokens == 5 * 20 + 5
    assert total.cost == Decimal("0.15") and total.currency == "USD"
    assert total.unknown_cost == 1  # triage's tokens have no price
    today = found["days"][logs["now"].date().isoformat()]
    assert today.turns == 5 and today.error_rate == pytest.approx(0.2)
    # p50 of 0.1, 0.2, 0.3, 0.4, 2.0 is 0.3; p95 interpolates between 0.4 and 2.0.
    assert today.latency_p50 == pytest.approx(0.3)
    assert today.latency_p95 == pytest.approx(0.4 + 0.8 * 1.6)
    assert set(found["chains"]) == {"support", "triage"}
    versions = found["versions"]
    assert set(versions) == {("support", 1), ("support", None), ("triage", None)}
    assert versions[("support", 1)].turns == 5 and versions[("support", 1)].refusals == 1
    assert versions[("support", None)].errors == 1
    only = dashboard_figures(start, end, "triage")
    assert only["total"].turns == 1 and set(only["chains"]) == {"triage"}


def test_the_page_shows_charts_and_tables(admin_client: Client, logs) -> None:
    response = admin_client.get(URL)
    assert response.status_code == 200
    page = response.content.decode()
    for chart in ("turns", "latency", "tokens", "versions"):
        assert f'id="dashboard-{chart}"' in page
    assert "chart.umd.min.js" in page and 'id="dashboard-data"' in page
    context = response.context
    assert [row["name"] for row in context["by_version"]] == [
        "support v1",
        "support draft",
        "triage draft",
    ]
    assert context["total_row"]["error_rate"] == "14.3%"
    days = context["charts"]["days"]
    assert len(days["labels"]) == 14
    assert days["latency_p50"][-1] == pytest.approx(0.3)
    assert days["latency_p50"][0] is None  # no turn that day: a gap, not a zero
    assert "0.15 USD" in page


def test_filters_narrow_and_bad_ranges_are_refused(admin_client: Client, logs) -> None:
    today = logs["now"].date().isoformat()
    response = admin_client.get(URL, {"from": today, "to": today, "chain": "support"})
    assert response.context["total"].turns == 5
    assert [row["name"] for row in response.context["by_chain"]] == ["support"]
    backwards = admin_client.get(URL, {"from": today, "to": "2000-01-01"})
    assert "From is after To." in backwards.content.decode()
    assert "total" not in backwards.context
    unknown = admin_client.get(URL, {"from": today, "to": today, "chain": "nope"})
    assert "Select a valid choice" in unknown.content.decode()
    # A chain filter alone keeps the default range.
    assert admin_client.get(URL, {"chain": "triage"}).context["chain"] == "triage"


def test_only_staff_who_may_view_call_logs(client: Client, django_user_model) -> None:
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert client.get(URL).status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_calllog"))
    assert client.get(URL).status_code == 200
    outsider = django_user_model.objects.create_user("outsider", password="pw")
    client.force_login(outsider)
    assert client.get(URL).status_code == 302  # to the admin login


def test_a_range_without_turns_says_so(admin_client: Client) -> None:
    response = admin_client.get(URL, {"from": "2020-01-01", "to": "2020-01-31"})
    assert response.context["total"] is None
    assert "No turns from 2020-01-01 to 2020-01-31." in response.content.decode()
    assert response.context["charts"]["days"]["turns"] == [None] * 31


def test_the_app_index_links_the_dashboard(admin_client: Client) -> None:
    page = admin_client.get("/admin/advisors_app/").content.decode()
    assert page.count(f'href="{URL}"') == 1


def test_the_main_admin_index_links_the_reports(client: Client, django_user_model) -> None:
    """Pages, not models: the app list does not show them, the index does after it."""
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    client.force_login(staff)
    assert "Spend report" not in client.get("/admin/").content.decode()  # not theirs to read
    staff.user_permissions.add(Permission.objects.get(codename="view_calllog"))
    page = client.get("/admin/").content.decode()
    assert f'href="{URL}"' in page and 'href="/admin/advisors_app/calllog/report/"' in page
    assert page.count('id="content-main"') == 1


def test_guard_block_and_flag_rates_per_rail(admin_client: Client, logs) -> None:
    from advisors_app.admin.dashboard import guard_rates
    from advisors_app.models import CallLog

    def verdict(rail: str, action: str) -> dict:
        return {"rail": rail, "check": "c", "action": action, "detail": {}, "failed": False}

    first, second, third, *_ = CallLog.objects.filter(chain_slug="support").order_by("pk")
    first.guard_verdicts = [verdict("input", "block")]
    second.guard_verdicts = [verdict("documents", "drop"), verdict("documents", "drop")]
    third.guard_verdicts = [verdict("documents", "block"), verdict("output", "redact")]
    for log in (first, second, third):
        log.save()
    start, end = local_range(logs["earlier"].date(), logs["now"].date())
    assert guard_rates(start, end) == {"documents": (1, 2), "input": (1, 1), "output": (0, 1)}
    assert guard_rates(start, end, "triage") == {}
    rows = admin_client.get(URL).context["guard_rows"]
    assert rows[0] == {
        "rail": "documents",
        "blocked": 1,
        "block_rate": "14.3%",
        "flagged": 2,
        "flag_rate": "28.6%",
    }
