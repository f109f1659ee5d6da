"""The chat page follows a turn's outcome: a first turn that stored nothing leaves no URL behind."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.models import Conversation
from tests.browser.test_chat_page import connected, last_reply, log_in, send
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_after_a_failed_first_turn_the_page_names_no_removed_conversation(
    chat_server: LiveServer, new_page: Any, django_user_model: Any
) -> None:
    django_user_model.objects.create_user("carol", password="pw")
    # An exhausted script: the model fails before any text (internal_error), nothing is stored.
    make_chain("broken", model=scripted_model("broken-model", responses=(), repeat=False))
    page = new_page()
    log_in(page, chat_server, "carol", "/chat/?chain=broken")
    connected(page)
    send(page, "Hello?")
    expect(last_reply(page).locator(".msg-error")).to_be_visible()
    expect(page).to_have_url(f"{chat_server.url}/chat/")
    expect(page.locator("#conversation-list a[data-id]")).to_have_count(0)
    assert not Conversation.objects.exists()
    response = page.reload()
    assert response is not None and response.status == 200  # no longer a 404
    connected(page)
    expect(page.locator(".msg-user")).to_have_count(0)
