"""The playground's compare page in Chromium: one message, two versions, two replies side by
side with their prompts and annotated pictures."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.admin_session import admin_log_in, watch
from tests.browser.axe import axe_violations
from tests.browser.screenshots import save
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_compare_shows_two_replies_side_by_side(
    chat_server: LiveServer, new_page: Any, django_user_model: Any
) -> None:
    django_user_model.objects.create_superuser("admin", password="pw")
    chain = make_chain(
        model=scripted_model(responses=("Hello from the script.",)),
        advisors=(("append", {"text": " (v1)"}),),
    )
    row = chain.advisors.get()
    row.params = {"text": " (draft)"}
    row.save()
    page = new_page(viewport={"width": 1400, "height": 900})
    problems = watch(page, chat_server)
    admin_log_in(page, chat_server, f"/admin/advisors_app/advisorchain/{chain.pk}/playground/")
    page.get_by_role("link", name="Compare two versions side by side").click()
    expect(page.get_by_label("Left")).to_have_value("draft")
    expect(page.get_by_label("Right")).to_have_value("production")
    page.get_by_label("Message").fill("hi there")
    page.get_by_role("button", name="Send to both").click()

    left = page.get_by_role("region", name="Left: the draft")
    right = page.get_by_role("region", name="Right: v1 (label production)")
    for side, suffix in ((left, "(draft)"), (right, "(v1)")):
        expect(side.locator(".compare-reply")).to_contain_text("Hello from the script.")
        expect(side.locator(".compare-prompt")).to_contain_text(f"hi there {suffix}")
        expect(side.locator("g.cp-layer")).to_have_count(1)
        assert (side.locator("g.cp-layer").get_attribute("data-time") or "").endswith(")")
    boxes = [left.bounding_box(), right.bounding_box()]
    assert boxes[0]["x"] + boxes[0]["width"] <= boxes[1]["x"]  # side by side
    assert abs(boxes[0]["y"] - boxes[1]["y"]) < 2
    expect(page.locator("#compare-summary")).to_have_text("Same reply. The final prompts differ.")
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    save(page, "playground-compare", full_page=True)
    violations = axe_violations(page, context="#content-main")
    assert violations == [], violations
    assert problems.errors == [] and problems.elsewhere == []
