"""The picture of a chain in Chromium: the demo chain's onion on its admin page, outermost
first, and the same picture annotated with each advisor's time in the playground."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.demo.loader import MAIN_CHAIN, ensure_demo_rows
from advisors_app.models import AdvisorChain
from tests.browser.admin_session import admin_log_in, watch
from tests.browser.axe import axe_violations
from tests.browser.screenshots import save
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

DEMO_LAYERS = [
    "safe_guard",
    "guard",
    "session_memory",
    "retrieval_augmentation",
    "tool_calling",
    "simple_logger",
]


def test_the_demo_chain_page_draws_its_onion(
    chat_server: LiveServer, new_page: Any, django_user_model: Any
) -> None:
    django_user_model.objects.create_superuser("admin", password="pw")
    ensure_demo_rows()
    chain = AdvisorChain.objects.get(slug=MAIN_CHAIN)
    page = new_page(viewport={"width": 1400, "height": 900})
    problems = watch(page, chat_server)
    admin_log_in(page, chat_server, f"/admin/advisors_app/advisorchain/{chain.pk}/change/")
    figure = page.locator("#chain-picture-panel figure.chain-picture")
    figure.scroll_into_view_if_needed()
    expect(figure).to_be_visible()
    svg = figure.get_by_role("img", name=f"The advisor chain {MAIN_CHAIN}")
    expect(svg).to_be_visible()
    layers = figure.locator("g.cp-layer")
    assert layers.evaluate_all("gs => gs.map(g => g.dataset.type)") == DEMO_LAYERS
    # Each ring sits inside the one before it: outermost first, the model at the core.
    boxes = [layers.nth(i).locator("rect").bounding_box() for i in range(len(DEMO_LAYERS))]
    model = figure.locator("g.cp-model rect").bounding_box()
    for outer, inner in zip([*boxes], [*boxes[1:], model], strict=True):
        assert outer["x"] < inner["x"] and outer["y"] < inner["y"]
        assert outer["x"] + outer["width"] > inner["x"] + inner["width"]
        assert outer["y"] + outer["height"] > inner["y"] + inner["height"]
    expect(layers.first).to_contain_text("1. Safe guard")
    expect(layers.first).to_contain_text("HIGHEST+100")
    expect(figure.locator("g.cp-model")).to_contain_text("Chat model:")
    description = svg.evaluate("svg => svg.querySelector('desc').textContent")
    assert description.startswith("From outermost to innermost")
    save(figure, "chain-picture", readme=True)
    violations = axe_violations(page, context="#chain-picture-panel")
    assert violations == [], violations
    assert problems.errors == [] and problems.elsewhere == []


def test_the_playground_draws_the_picture_with_each_advisors_time(
    chat_server: LiveServer, new_page: Any, django_user_model: Any
) -> None:
    django_user_model.objects.create_superuser("admin", password="pw")
    chain = make_chain(
        model=scripted_model(responses=("Hello from the script.",)),
        advisors=(
            ("safe_guard", {"words": ["bomb"]}),
            ("message_chat_memory", {}),
            ("append", {"text": " (be nice)"}),
        ),
    )
    page = new_page()
    problems = watch(page, chat_server)
    path = f"/admin/advisors_app/advisorchain/{chain.pk}/playground/"
    admin_log_in(page, chat_server, path)
    page.get_by_label("Message").fill("hi there")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#reply")).to_contain_text("Hello from the script.")
    figure = page.locator("#trace figure.chain-picture")
    figure.scroll_into_view_if_needed()
    expect(figure).to_be_visible()
    layers = figure.locator("g.cp-layer")
    assert layers.evaluate_all("gs => gs.map(g => g.dataset.type)") == [
        "safe_guard",
        "message_chat_memory",
        "append",
    ]
    times = layers.evaluate_all("gs => gs.map(g => g.dataset.time)")
    assert all(t and t.endswith(")") and " ms" in t for t in times), times
    expect(layers.first.locator("text.cp-time")).to_be_visible()
    assert (figure.locator("g.cp-model").get_attribute("data-time") or "").endswith(" ms")
    expect(figure).to_contain_text("Ran the draft.")
    save(page, "playground-picture", full_page=True)
    violations = axe_violations(page, context="#trace")
    assert violations == [], violations
    assert problems.errors == [] and problems.elsewhere == []
