"""The chat page draws ``reasoning`` frames collapsed above the answer, and fills a tool card's
arguments in from ``tool_call_delta`` frames (issue 43). The frames are injected into the
page's socket right after the server's ``start``, as a reasoning model with a tool loop would
send them; the rest of the turn is the server's."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.browser.test_chat_page import connected, last_reply, log_in, send, wait_done
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CALL = {"type": "tool_call_delta", "id": "call_a", "name": "calculator"}
INJECTED = [
    {"type": "reasoning", "text": "Six times seven; "},
    {"type": "reasoning", "text": "the calculator knows."},
    {**CALL, "arguments_delta": ""},
    {**CALL, "arguments_delta": '{"expression": '},
    {**CALL, "arguments_delta": '"6 * 7"}'},
]


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    make_chain("support", model=scripted_model("support-model", responses=("It is 42.",)))
    return django_user_model.objects.create_user("alice", password="pw")


def test_reasoning_is_collapsed_and_the_tool_card_fills_in(
    chat_server: LiveServer, new_page: Any, alice: Any
) -> None:
    page = new_page()

    def route(ws: Any) -> None:
        server = ws.connect_to_server()

        def from_server(message: Any) -> None:
            ws.send(message)
            if json.loads(message).get("type") == "start":
                for frame in INJECTED:
                    ws.send(json.dumps(frame))

        server.on_message(from_server)

    page.route_web_socket(re.compile(r"/ws/chat/"), route)
    log_in(page, chat_server, "alice", "/chat/?chain=support")
    connected(page)
    send(page, "6 * 7?")
    wait_done(page)
    reply = last_reply(page)
    reasoning = reply.locator(".msg-reasoning")
    expect(reasoning).to_have_count(1)
    expect(reasoning).not_to_have_attribute("open", "")
    expect(reasoning.locator("pre")).to_have_text("Six times seven; the calculator knows.")
    expect(reply.locator(".msg-body")).to_have_text("It is 42.")
    card = reply.locator(".tool-card")
    expect(card.locator(".tool-name")).to_have_text("calculator")
    expect(card.locator(".tool-args pre")).to_have_text('{"expression": "6 * 7"}')
