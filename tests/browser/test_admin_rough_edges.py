"""Admin rough edges of issue 24 in Chromium: a call log's trace table fits a laptop window
(1280–1400 px wide) with its Status column in view, and admin pages ask for no missing icon."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from advisors_app.models import CallLog
from tests.browser.admin_session import admin_log_in
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: The demo chain's advisors, nested as a turn runs them, the last one failing.
ADVISORS = [
    ("SafeGuardAdvisor", HIGHEST_PRECEDENCE + 100),
    ("SessionTurnAdvisor", HIGHEST_PRECEDENCE + 200),
    ("RetrievalAugmentationAdvisor", 0),
    ("ToolCallingAdvisor", HIGHEST_PRECEDENCE + 300),
    ("SessionMemoryAdvisor", HIGHEST_PRECEDENCE + 400),
    ("SimpleLoggerAdvisor", LOWEST_PRECEDENCE - 1000),
    ("ChatModelCallAdvisor", LOWEST_PRECEDENCE),
]


def trace() -> dict[str, Any]:
    entries = []
    for index, (name, order) in enumerate(ADVISORS):
        last = index == len(ADVISORS) - 1
        entries.append(
            {
                "index": index,
                "parent": index - 1 if index else None,
                "name": name,
                "order": order,
                "mode": "stream",
                "started": 0.0012 * index,
                "duration": 17.58356509400005 - index,
                "self_duration": 0.0123456,
                "first_chunk": 2.3456789,
                "chunks": 212,
                "status": "error" if last else "ok",
                "error": "ProviderUnavailableError: the model server answered 503" if last else "",
                "usage": {"total_tokens": 1234},
            }
        )
    return {"entries": entries}


@pytest.mark.parametrize("width", [1280, 1400])
def test_a_call_logs_trace_table_keeps_status_in_view(
    chat_server: LiveServer, new_page: Any, django_user_model: Any, width: int
) -> None:
    django_user_model.objects.create_superuser("admin", password="pw")
    log = CallLog.objects.create(
        trace_id="t" * 32,
        chain_slug="python-docs",
        status="error",
        mode="stream",
        latency=17.58356509400005,
        time_to_first_token=2.3456789,
        trace=trace(),
    )
    page = new_page(viewport={"width": width, "height": 900})
    admin_log_in(page, chat_server, f"/admin/advisors_app/calllog/{log.pk}/change/")
    table = page.locator("table.advisor-trace")
    expect(table).to_be_visible()
    status = table.get_by_role("columnheader", name="Status")
    box = status.bounding_box()
    assert box is not None and box["x"] + box["width"] <= width, box
    # The page itself does not scroll sideways; a wider table scrolls in its own box.
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    failed = table.locator("tbody tr").last
    expect(failed).to_contain_text("error")
    cell = failed.locator("td").nth(1).bounding_box()
    assert cell is not None and cell["x"] + cell["width"] <= width
    expect(page.locator(".field-seconds")).to_contain_text("17.58 s")
    table.scroll_into_view_if_needed()  # the saved screenshot shows it
