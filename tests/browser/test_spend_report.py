"""The admin's spend report in Chromium: the vendored Chart.js draws spend by day, offline,
without console errors."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.browser.screenshots import save
from tests.cost_logs import log_call, priced_round
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

REPORT = "/admin/advisors_app/calllog/report/"


def test_the_spend_report_draws_its_chart(
    chat_server: LiveServer, new_page: Any, django_user_model: Any
) -> None:
    admin = django_user_model.objects.create_superuser("admin", password="pw")
    now = timezone.now()
    log_call(admin, "support", now, priced_round("gpt", 1000, 500, "0.01", "0.02"))
    log_call(admin, "support", now - timedelta(days=3), priced_round("gpt", 10, 5, "0.1", "0.2"))
    log_call(admin, "triage", now - timedelta(days=3), priced_round("gpt", 10, 5, None, None))

    page = new_page()
    problems: list[str] = []

    def console(message: Any) -> None:
        # The admin's pages link no icon: Chromium's own /favicon.ico request is not the page's.
        if message.type == "error" and not message.location["url"].endswith("/favicon.ico"):
            problems.append(f"{message.text} ({message.location['url']})")

    page.on("console", console)
    page.on("pageerror", lambda error: problems.append(str(error)))
    elsewhere: list[str] = []
    page.on(
        "request",
        lambda r: None if r.url.startswith(chat_server.url) else elsewhere.append(r.url),
    )
    page.goto(f"{chat_server.url}/admin/login/?next={quote(REPORT)}")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(chat_server.url + REPORT)

    canvas = page.locator("canvas#spend-by-day")
    expect(canvas).to_be_visible()
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 200
    drawn = page.evaluate(
        """() => {
            const chart = Chart.getChart("spend-by-day");
            const canvas = document.getElementById("spend-by-day");
            const pixels = canvas.getContext("2d")
                .getImageData(0, 0, canvas.width, canvas.height).data;
            let painted = 0;
            for (let i = 3; i < pixels.length; i += 4) if (pixels[i]) painted++;
            return {
                type: chart.config.type,
                labels: chart.data.labels.length,
                data: chart.data.datasets.map(d => [d.label, d.data.slice(-4)]),
                painted: painted,
            };
        }"""
    )
    assert drawn["type"] == "bar" and drawn["labels"] == 30
    assert drawn["data"] == [["USD", [pytest.approx(0.3), 0, 0, pytest.approx(0.03)]]]
    assert drawn["painted"] > 1000  # axes, ticks and bars were drawn
    expect(page.get_by_text("1 call with unknown price")).to_be_visible()
    expect(page.locator("caption", has_text="By chain")).to_be_visible()
    save(page, "spend-report", full_page=True)
    assert problems == []
    assert elsewhere == []
