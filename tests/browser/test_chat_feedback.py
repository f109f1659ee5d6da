"""👍/👎 on the chat page in Chromium (issue 22): on a reply as soon as it is done, with a
reason after 👎, changed, shown again after a reload, and undone by clicking it again."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.models import Score
from tests.browser.test_chat_page import connected, last_reply, log_in, send, wait_done, words
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ANSWER = "Refunds go back to the **original payment method** within 5 business days."


@pytest.fixture
def support(django_user_model: Any) -> str:
    django_user_model.objects.create_user("alice", password="pw")
    model = scripted_model("support-model", responses=[words(ANSWER)])
    model.settings["chunk_delay"] = 0.02
    model.save()
    make_chain("support", model=model, advisors=(("message_chat_memory", {"max_messages": 20}),))
    return "support"


def thumbs(reply: Any) -> tuple[Any, Any]:
    return (
        reply.get_by_role("button", name="Good reply"),
        reply.get_by_role("button", name="Bad reply"),
    )


def vote() -> tuple[Any, ...] | None:
    """Alice's stored thumbs vote: ``(value, reason)``, or ``None``."""
    row = Score.objects.filter(key="thumbs", source="user").values_list("numeric_value", "reason")
    return row.first()


def test_a_reply_is_rated_live_changed_reloaded_and_undone(
    chat_server: LiveServer, new_page: Any, support: str
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", f"/chat/?chain={support}")
    connected(page)
    send(page, "Refunds?")
    wait_done(page)
    reply = last_reply(page)
    up, down = thumbs(reply)
    expect(up).to_have_attribute("aria-pressed", "false")
    expect(down).to_have_attribute("aria-pressed", "false")
    reasons = reply.get_by_role("group", name="What was wrong? (optional)")
    expect(reasons).to_be_hidden()

    # 👎 right after done (the page knows the reply by the done frame's message_id).
    down.click()
    expect(down).to_have_attribute("aria-pressed", "true")
    expect(reasons).to_be_visible()
    assert vote() == (0.0, "")
    reasons.get_by_role("button", name="Incomplete").click()
    expect(reasons.get_by_role("button", name="Incomplete")).to_have_attribute(
        "aria-pressed", "true"
    )
    assert vote() == (0.0, "incomplete")

    # Changed to 👍: the reason goes with the 👎.
    up.click()
    expect(up).to_have_attribute("aria-pressed", "true")
    expect(down).to_have_attribute("aria-pressed", "false")
    expect(reasons).to_be_hidden()
    assert vote() == (1.0, "")

    # A reopened conversation shows the vote; clicking the pressed 👍 undoes it.
    send(page, "And by bank transfer?")
    wait_done(page)
    page.reload()
    connected(page)
    replies = page.locator(".msg-assistant")
    expect(replies).to_have_count(2)
    first_up, first_down = thumbs(replies.first)
    expect(first_up).to_have_attribute("aria-pressed", "true")
    expect(first_down).to_have_attribute("aria-pressed", "false")
    second_up, second_down = thumbs(replies.last)
    expect(second_up).to_have_attribute("aria-pressed", "false")
    expect(second_down).to_have_attribute("aria-pressed", "false")
    first_up.click()
    expect(first_up).to_have_attribute("aria-pressed", "false")
    assert vote() is None

    # The second reply, reopened, takes a 👎 with a reason, which a reload shows again.
    second_down.click()
    second_reasons = replies.last.get_by_role("group", name="What was wrong? (optional)")
    second_reasons.get_by_role("button", name="Wrong or made up").click()
    expect(second_reasons.get_by_role("button", name="Wrong or made up")).to_have_attribute(
        "aria-pressed", "true"
    )
    page.reload()
    connected(page)
    reopened = page.locator(".msg-assistant").last
    expect(thumbs(reopened)[1]).to_have_attribute("aria-pressed", "true")
    expect(reopened.get_by_role("button", name="Wrong or made up")).to_have_attribute(
        "aria-pressed", "true"
    )
    expect(thumbs(page.locator(".msg-assistant").first)[0]).to_have_attribute(
        "aria-pressed", "false"
    )
    assert vote() == (0.0, "wrong")
