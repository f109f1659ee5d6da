"""Bidi control characters in Chromium: titles, file names and messages shown isolated.

A title or file name with a right-to-left override reads backwards (``invoice<RLO>fdp.exe`` as
``invoiceexe.pdf``) and reorders what follows it on the line. The chat page drops the controls
and isolates each such name (``dir="auto"``, ``unicode-bidi: isolate``): in the server-drawn
sidebar, in a conversation the page adds live, and in a reply's sources.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.memory.conversations import conversation_key
from advisors_app.models import Collection, Conversation
from tests.browser.test_chat_page import connected, last_reply, log_in, send, wait_done, words
from tests.factories import make_chain, scripted_model
from tests.live_server import LiveServer

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

RLO = "\u202e"
HEBREW = "שלום עולם"

#: For a link or source title: its text, direction, bidi isolation and whether the text after
#: it on the line (a source's score) stays to its right.
DESCRIBE = """
(node) => ({
  text: node.textContent,
  dir: node.getAttribute("dir"),
  rtl: node.matches(":dir(rtl)"),
  bidi: getComputedStyle(node).unicodeBidi,
  nextToTheRight: !node.nextElementSibling ||
    node.nextElementSibling.getBoundingClientRect().left >= node.getBoundingClientRect().right - 1,
})
"""


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    alice = django_user_model.objects.create_user("alice", password="pw")
    handbook = Collection.objects.create(slug="handbook", name="Handbook")
    ingest_text(handbook, f"refunds{RLO}dm.exe", "Refunds are paid to the original payment method.")
    model = scripted_model("files-model", responses=[words("Refunds go back to your card.")])
    make_chain(
        "files",
        model=model,
        advisors=(("question_answer", {"collection": "handbook", "top_k": 1}),),
    )
    for public_id, title in (("spoof", f"invoice{RLO}fdp.exe"), ("hebrew", HEBREW)):
        Conversation.objects.create(
            conversation_id=conversation_key(alice, public_id), owner=alice, title=title
        )
    return alice


def test_titles_and_file_names_are_shown_without_controls_and_isolated(
    chat_server: LiveServer, new_page: Any, alice: Any
) -> None:
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=files")
    connected(page)

    spoof = page.locator('#conversation-list a[data-id="spoof"]').evaluate(DESCRIBE)
    assert spoof == {
        "text": "invoicefdp.exe",
        "dir": "auto",
        "rtl": False,
        "bidi": "isolate",
        "nextToTheRight": True,
    }
    hebrew = page.locator('#conversation-list a[data-id="hebrew"]').evaluate(DESCRIBE)
    assert (hebrew["text"], hebrew["rtl"], hebrew["bidi"]) == (HEBREW, True, "isolate")

    # A new conversation's title (its first message) arrives in a frame; the page adds it.
    send(page, f"Refunds{RLO} ?tnemyap")
    wait_done(page)
    added = page.locator("#conversation-list a").first
    expect(added).not_to_have_attribute("data-id", "spoof")
    described = added.evaluate(DESCRIBE)
    assert RLO not in described["text"] and described["text"].startswith("Refunds ?tnemyap")
    assert (described["dir"], described["bidi"]) == ("auto", "isolate")

    # The source's file name, then its score, which the name no longer reorders.
    source = last_reply(page).locator(".source-title").first
    assert source.evaluate(DESCRIBE) == {
        "text": "refundsdm.exe",
        "dir": "auto",
        "rtl": False,
        "bidi": "isolate",
        "nextToTheRight": True,
    }

    # Reopened from the history: the same, drawn from the stored metadata.
    page.reload()
    connected(page)
    source = last_reply(page).locator(".source-title").first
    assert source.evaluate(DESCRIBE)["text"] == "refundsdm.exe"


def test_a_first_message_with_an_override_leaves_the_sidebar_and_page_in_order(
    chat_server: LiveServer, new_page: Any, alice: Any
) -> None:
    """The issue's case: a first message holding U+202E reversed its sidebar title."""
    page = new_page()
    log_in(page, chat_server, "alice", "/chat/?chain=files")
    connected(page)
    send(page, f"{RLO}Where is my refund?")
    wait_done(page)
    for _reloaded in (False, True):
        title = page.locator("#conversation-list a[aria-current=page]")
        described = title.evaluate(DESCRIBE)
        assert described["text"] == "Where is my refund?"
        assert (described["rtl"], described["bidi"]) == (False, "isolate")
        # The message itself is kept as sent, isolated in its bubble: the override turns only
        # its own text, never the heading or the reply after it.
        bubble = page.locator(".msg-user .msg-body").last
        assert bubble.evaluate("(node) => node.textContent") == f"{RLO}Where is my refund?"
        assert bubble.evaluate("(node) => getComputedStyle(node).unicodeBidi") == "isolate"
        page.reload()
        connected(page)
