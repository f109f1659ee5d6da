"""The admin's dashboard in Chromium: the vendored Chart.js draws its four charts from call
logs, offline and without console errors, with the figures in the tables beside them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from advisors_app.models import AdvisorChain, CallLog
from tests.browser.admin_session import admin_log_in, watch
from tests.browser.axe import axe_violations
from tests.browser.screenshots import save
from tests.cost_logs import log_call, priced_round
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DASHBOARD = "/admin/advisors_app/advisorchain/dashboard/"


def test_the_dashboard_draws_its_charts_with_data(
    chat_server: LiveServer, new_page: Any, django_user_model: Any
) -> None:
    admin = django_user_model.objects.create_superuser("admin", password="pw")
    for slug in ("support", "triage"):
        AdvisorChain.objects.create(slug=slug, name=slug.title())
    now = timezone.now()
    for day in range(8):
        for n in range(3):
            log = log_call(
                admin,
                "support" if n else "triage",
                now - timedelta(days=day),
                priced_round("gpt", 300 + 40 * n, 80 + day, "0.0003", "0.0006"),
            )
            # Vary the outcome and timings, as real turns do.
            CallLog.objects.filter(pk=log.pk).update(
                latency=0.4 + 0.15 * n + 0.05 * day,
                mode="stream" if n else "call",
                time_to_first_token=0.1 + 0.02 * day if n else None,
                status="error" if (day, n) == (2, 1) else "ok",
                finish_reason="CONTENT_FILTER" if (day, n) == (1, 2) else "STOP",
            )

    page = new_page(viewport={"width": 1400, "height": 900})
    problems = watch(page, chat_server)
    admin_log_in(page, chat_server, "/admin/advisors_app/")
    page.evaluate("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")
    page.reload()
    page.get_by_role("link", name="Dashboard").click()
    page.wait_for_url(chat_server.url + DASHBOARD)
    expect(page.locator("#content h1")).to_have_text("Dashboard")
    expect(page.locator(".dashboard-total")).to_contain_text("24 turns")

    drawn = page.evaluate(
        """() => ["turns", "latency", "tokens", "versions"].map(name => {
            const canvas = document.getElementById("dashboard-" + name);
            const chart = Chart.getChart(canvas);
            const pixels = canvas.getContext("2d")
                .getImageData(0, 0, canvas.width, canvas.height).data;
            let painted = 0;
            for (let i = 3; i < pixels.length; i += 4) if (pixels[i]) painted++;
            return {
                name: name,
                labels: chart.data.labels.length,
                datasets: chart.data.datasets.map(d => d.label),
                colours: chart.data.datasets.map(d => d.borderColor || d.backgroundColor),
                painted: painted,
            };
        })"""
    )
    by_name = {chart["name"]: chart for chart in drawn}
    assert by_name["turns"]["labels"] == 14
    assert by_name["turns"]["datasets"] == ["completed", "refused", "errors", "cancelled"]
    assert by_name["latency"]["datasets"][:2] == ["latency p50", "latency p95"]
    assert by_name["versions"]["labels"] == 2  # support draft, triage draft
    assert all(chart["painted"] > 1000 for chart in drawn), drawn
    for chart in drawn:  # each series its own colour within a chart
        assert len(set(chart["colours"])) == len(chart["colours"]), chart

    turns = page.get_by_role("table", name="Turns by day")
    expect(turns.locator("tbody tr")).to_have_count(8)
    expect(page.get_by_role("table", name="By chain")).to_contain_text("support")
    expect(page.get_by_role("table", name="By version")).to_contain_text("triage draft")
    save(page, "dashboard", readme=True)
    violations = axe_violations(page, context="#content-main")
    assert violations == [], violations

    # The chain filter narrows every figure.
    page.get_by_role("combobox", name="Chain").select_option("triage")
    page.get_by_role("button", name="Show").click()
    expect(page.locator(".dashboard-total")).to_contain_text("8 turns")
    expect(page.get_by_role("table", name="By chain").locator("tbody tr")).to_have_count(1)
    assert problems.errors == [] and problems.elsewhere == []
