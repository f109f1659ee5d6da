"""The chat page's rough edges of issue 24, each as a user met it, in Chromium.

Python names in a reply (``__enter__()`` was bold "enter"), a JSON answer (one flattened
paragraph), switching chain mid-conversation (the other chain's history came along), a message
the server cannot take (the socket dropped and the page said "what arrived so far was saved"),
keyboard use and axe-core's serious and critical findings.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.models import ChatMessage, Conversation
from tests.browser.axe import axe_violations
from tests.browser.test_chat_page import connected, last_reply, log_in, send, wait_done, words
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PYTHON_ANSWER = (
    "A `with` block calls __enter__() first and __exit__() last. Classes may declare "
    "__slots__, and __init__ sets attributes (see __init__.py and my_var_name). "
    "This is **bold** and __bold words__ too."
)
JSON_ANSWER = {"answer": "A with block calls __enter__ and __exit__.", "topics": ["with"]}
#: Starts with "[" but is Markdown, not JSON.
NUMBERED_ANSWER = "[1] A with block calls **__enter__()** first."
MEMORY = ("message_chat_memory", {"max_messages": 10})


@pytest.fixture
def chains(django_user_model: Any) -> None:
    django_user_model.objects.create_user("alice", password="pw")
    django_user_model.objects.create_superuser("admin", password="pw")
    for slug, name, answer in (
        ("plain", "Python docs", PYTHON_ANSWER),
        ("json", "Python docs as JSON", json.dumps(JSON_ANSWER)),
        ("numbered", "Numbered", NUMBERED_ANSWER),
    ):
        chain = make_chain(
            slug,
            model=scripted_model(f"{slug}-model", responses=[words(answer)]),
            advisors=(MEMORY,),
        )
        chain.name = name
        chain.save()


def test_python_names_survive_markdown_live_and_reopened(
    chat_server: LiveServer, new_page: Any, chains: None
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=plain")
    connected(page)
    send(page, "How does with work?")
    wait_done(page)
    for reopened in (False, True):
        body = last_reply(page).locator(".msg-body")
        text = body.inner_text()
        for name in ("__enter__()", "__exit__()", "__slots__", "__init__ sets", "__init__.py"):
            assert name in text, (name, text, reopened)
        assert "my_var_name" in text
        # Emphasis meant as emphasis still is.
        assert body.locator("strong").all_inner_texts() == ["bold", "bold words"]
        assert body.locator("em").count() == 0
        page.reload()
        connected(page)


def test_a_json_answer_is_an_indented_code_block(
    chat_server: LiveServer, new_page: Any, chains: None
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=json")
    connected(page)
    send(page, "How does with work?")
    wait_done(page)
    for _reopened in (False, True):
        block = last_reply(page).locator(".msg-body pre.msg-json code")
        expect(block).to_have_text(json.dumps(JSON_ANSWER, indent=2))
        assert last_reply(page).locator(".msg-body p").count() == 0
        page.reload()
        connected(page)

    # An answer that only starts with a bracket stays Markdown.
    page.goto(f"{chat_server.url}/chat/?chain=numbered")
    connected(page)
    send(page, "And numbered?")
    wait_done(page)
    body = last_reply(page).locator(".msg-body")
    expect(body.locator("p")).to_have_text("[1] A with block calls __enter__() first.")
    expect(body.locator("strong")).to_have_text("__enter__()")
    assert body.locator("pre").count() == 0


def test_switching_chain_starts_a_new_conversation(
    chat_server: LiveServer, new_page: Any, chains: None
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=plain")
    connected(page)
    send(page, "How does with work?")
    wait_done(page)
    first = page.locator("#conversation-list a[aria-current=page]").get_attribute("data-id")

    page.get_by_label("Chain").select_option("json")
    connected(page)
    expect(page.locator(".msg")).to_have_count(0)
    expect(page.locator(".chat-switched")).to_have_text(
        "New conversation with Python docs as JSON. The previous one is in the list of "
        "conversations."
    )
    expect(page).to_have_url(f"{chat_server.url}/chat/?chain=json")
    # Switching on before anything was said: no stale notice naming the other chain.
    page.get_by_label("Chain").select_option("numbered")
    connected(page)
    expect(page.locator(".chat-switched")).to_have_count(0)
    page.get_by_label("Chain").select_option("json")
    connected(page)
    send(page, "And as JSON?")
    wait_done(page)
    expect(last_reply(page).locator("pre.msg-json")).to_be_visible()
    expect(page.locator(".msg")).to_have_count(2)
    links = page.locator("#conversation-list a[data-id]")
    expect(links).to_have_count(2)
    second = page.locator("#conversation-list a[aria-current=page]").get_attribute("data-id")
    assert second != first

    # Each conversation holds its own chain's turn only: nothing of the first reached the JSON
    # chain's memory.
    counts = [c.messages.count() for c in Conversation.objects.order_by("created_at")]
    assert counts == [2, 2]
    json_reply = ChatMessage.objects.filter(message_type="assistant").order_by("id").last()
    assert json.loads(json_reply.text) == JSON_ANSWER

    # Back: the first conversation, on its chain.
    page.go_back()
    connected(page)
    expect(page.locator(".msg")).to_have_count(2)
    expect(page.get_by_label("Chain")).to_have_value("plain")


def test_a_message_over_the_limit_is_refused_in_the_page(
    chat_server: LiveServer, new_page: Any, chains: None
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=plain")
    connected(page)
    textbox = page.get_by_role("textbox", name="Message")
    # Pasted past maxlength by a script, an extension or the developer tools: 1.2 MB, over
    # the server's frame limit.
    textbox.evaluate(
        "(node) => { node.removeAttribute('maxlength'); node.value = 'x'.repeat(1200000); }"
    )
    textbox.press("Enter")
    expect(page.get_by_role("alert")).to_have_text(
        "The message is 1,200,000 characters long; at most 8,000 can be sent. Shorten it and "
        "send again."
    )
    expect(page.locator(".msg")).to_have_count(0)
    assert textbox.evaluate("(node) => node.value.length") == 1_200_000
    expect(textbox).to_be_focused()
    expect(page.locator("#connection")).to_have_text("Connected")
    assert not ChatMessage.objects.exists()


def test_a_pasted_message_over_the_limit_is_kept_whole_and_not_sent(
    chat_server: LiveServer, new_page: Any, chains: None
) -> None:
    """A paste one character over the limit: the page says so at once, keeps every character
    (no maxlength cuts it) and refuses to send it; shortened, it goes."""
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=plain")
    connected(page)
    textbox = page.get_by_role("textbox", name="Message")
    textbox.focus()
    page.keyboard.insert_text("y" * 8001)  # as a paste arrives: user input, not a script
    alert = page.get_by_role("alert")
    expect(alert).to_have_text(
        "The message is 8,001 characters long; at most 8,000 can be sent. Shorten it and "
        "send again."
    )
    expect(textbox).to_have_attribute("aria-invalid", "true")
    assert textbox.evaluate("(node) => node.value.length") == 8001
    textbox.press("Enter")
    expect(page.locator(".msg")).to_have_count(0)
    assert not ChatMessage.objects.exists()
    textbox.press("Backspace")
    expect(alert).to_be_hidden()
    textbox.press("Enter")
    wait_done(page)
    assert len(ChatMessage.objects.filter(message_type="user").get().text) == 8000


def test_a_socket_dropped_before_any_answer_says_nothing_was_saved(
    chat_server: LiveServer, new_page: Any, chains: None
) -> None:
    page = new_page()

    def drop_messages(socket: Any) -> None:
        # The server side of a frame it will not read: the socket closes, no frame comes back.
        server = socket.connect_to_server()
        socket.on_message(
            lambda text: socket.close(code=4009) if '"message"' in text else server.send(text)
        )

    page.route_web_socket(re.compile("/ws/chat/"), drop_messages)
    log_in(page, chat_server, "alice", "/chat/?chain=plain")
    connected(page)
    send(page, "Hello?")
    expect(last_reply(page).locator(".msg-note")).to_have_text(
        "The connection dropped before the server answered; nothing was saved. Your message "
        "is back in the box."
    )
    expect(page.get_by_role("textbox", name="Message")).to_have_value("Hello?")
    assert "what arrived so far was saved" not in page.locator("#messages").inner_text()


def test_the_chat_page_by_keyboard_with_no_serious_axe_findings(
    chat_server: LiveServer, new_page: Any, chains: None
) -> None:
    page = new_page()
    log_in(page, chat_server, "admin", "/chat/?chain=plain")
    connected(page)
    assert axe_violations(page) == []

    # From the chain picker, Tab reaches the message box; Enter sends, Shift+Enter does not.
    page.get_by_label("Chain").focus()
    textbox = page.get_by_role("textbox", name="Message")
    for _ in range(5):
        page.keyboard.press("Tab")
        if textbox.evaluate("(node) => node === document.activeElement"):
            break
    expect(textbox).to_be_focused()
    page.keyboard.type("First line")
    page.keyboard.press("Shift+Enter")
    page.keyboard.type("second line")
    expect(textbox).to_have_value("First line\nsecond line")
    page.keyboard.press("Enter")
    # While the reply streams, focus is on Stop (Escape works too); then back in the box.
    expect(page.locator(".msg-user .msg-body")).to_have_text("First line\nsecond line")
    wait_done(page)
    expect(textbox).to_be_focused()
    expect(textbox).to_have_value("")

    # The reply, its footer (trace, 👍/👎) and the sidebar: still nothing serious.
    assert axe_violations(page) == []
    last_reply(page).get_by_role("button", name="Good reply").focus()
    page.keyboard.press("Enter")
    expect(last_reply(page).get_by_role("button", name="Good reply")).to_have_attribute(
        "aria-pressed", "true"
    )
    last_reply(page).get_by_role("button", name="Trace").press("Enter")
    expect(page.get_by_role("dialog")).to_be_visible()
    expect(page.get_by_role("dialog").locator("table")).to_be_visible()
    status = page.get_by_role("dialog").get_by_role("columnheader", name="Status").bounding_box()
    assert status is not None and status["x"] + status["width"] <= 1280
    assert axe_violations(page) == []
    page.keyboard.press("Escape")
    expect(page.get_by_role("dialog")).to_be_hidden()
