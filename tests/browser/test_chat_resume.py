"""The chat page resumes a turn by itself after its websocket drops (issue 23)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.models import ChatMessage
from tests.browser.screenshots import ARTIFACTS
from tests.browser.test_chat_page import (
    SLOW_ANSWER,
    connected,
    last_reply,
    log_in,
    send,
    site,  # noqa: F401 (fixture)
)
from tests.helpers import database_url_for_subprocess
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
#: Keeps every WebSocket the page opens reachable, so a test can drop one.
KEEP_SOCKETS = """
(() => {
  const Native = window.WebSocket;
  window.__sockets = [];
  window.WebSocket = function (url, protocols) {
    const ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    window.__sockets.push(ws);
    return ws;
  };
  window.WebSocket.prototype = Native.prototype;
  Object.assign(window.WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
})();
"""


@pytest.fixture(scope="module")
def continue_server(django_db_setup: Any) -> Iterator[LiveServer]:
    server = LiveServer(
        ARTIFACTS / "server-continue.log",
        application="tests.live_asgi:application",
        DATABASE_URL=database_url_for_subprocess(),
        DJANGO_SETTINGS_MODULE="tests.browser.settings_continue",
    )
    with server:
        yield server


def test_a_dropped_socket_is_resumed_and_the_whole_answer_shows(
    continue_server: LiveServer,
    new_page: Any,
    site: dict[str, Any],  # noqa: F811
) -> None:
    page = new_page()
    page.add_init_script(KEEP_SOCKETS)
    log_in(page, continue_server, "alice", "/chat/?chain=slow")
    connected(page)
    send(page, "Tell me a story")
    body = last_reply(page).locator(".msg-body")
    expect(body).to_contain_text("word2")
    page.evaluate("window.__sockets[window.__sockets.length - 1].close()")  # the lid closes
    expect(page.locator("#connection")).to_have_text("Connected", timeout=30_000)
    expect(last_reply(page).locator(".msg-meta")).to_be_visible(timeout=30_000)
    # The whole answer, each word once, and no "connection dropped" note.
    expect(body).to_have_text(SLOW_ANSWER.strip())
    expect(last_reply(page).locator(".msg-note")).to_have_count(0)
    assert page.evaluate("window.__sockets.length") == 2
    stored = ChatMessage.objects.filter(message_type="assistant").order_by("-id").first()
    assert stored is not None and stored.text == SLOW_ANSWER
