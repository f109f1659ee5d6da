"""Bidi control characters in titles and file names: dropped and isolated wherever shown."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.template import Context, Template
from django.test import Client

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.memory.conversations import conversation_key
from advisors_app.models import Collection, Conversation
from advisors_app.security.bidi import isolated, without_bidi_controls

RLO = "\u202e"
#: A title that reads as "invoiceexe.pdf" with its override, and would reorder what follows.
SPOOF = f"invoice{RLO}fdp.exe"
CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def test_every_explicit_directional_control_is_dropped_and_the_rest_kept() -> None:
    assert without_bidi_controls(f"a{CONTROLS}b") == "ab"
    assert without_bidi_controls(SPOOF) == "invoicefdp.exe"
    # Right-to-left text and the directional marks are not controls of this kind.
    assert without_bidi_controls("שלום \u200f(1)\u200e \u061c") == "שלום \u200f(1)\u200e \u061c"


def test_isolated_escapes_and_wraps_in_bdi() -> None:
    assert isolated(f"<b>{RLO}x</b>") == "<bdi>&lt;b&gt;x&lt;/b&gt;</bdi>"


def test_the_template_filter_drops_the_controls() -> None:
    template = Template("{% load advisors_text %}<a dir=auto>{{ t|without_bidi_controls }}</a>")
    assert (
        template.render(Context({"t": f"<i>{SPOOF}"})) == "<a dir=auto>&lt;i&gt;invoicefdp.exe</a>"
    )


def shown_text(html: str) -> str:
    """The page's text outside tags (attributes such as an action checkbox's label left out)."""
    return re.sub(r"<[^>]*>", "", html)


def sidebar(html: str) -> str:
    found = re.search(r'<ul id="conversation-list".*?</ul>', html, re.S)
    assert found is not None
    return found.group(0)


@pytest.mark.django_db
def test_the_chat_sidebar_shows_titles_without_controls_isolated(
    client: Client, django_user_model: Any
) -> None:
    alice = django_user_model.objects.create_user("alice", password="pw")
    Conversation.objects.create(
        conversation_id=conversation_key(alice, "c1"), owner=alice, title=SPOOF
    )
    Conversation.objects.create(
        conversation_id=conversation_key(alice, "c2"), owner=alice, title=RLO
    )
    client.force_login(alice)
    links = sidebar(client.get("/chat/").content.decode())
    assert RLO not in links
    assert re.search(r'<a [^>]*dir="auto"[^>]*>invoicefdp\.exe</a>', links), links
    assert re.search(r'<a [^>]*dir="auto"[^>]*>Untitled</a>', links), links  # nothing left
    # The stored title is what the user sent.
    assert Conversation.objects.filter(title=SPOOF).exists()


@pytest.mark.django_db
def test_the_admin_lists_titles_and_file_names_without_controls_in_bdi(
    admin_client: Client, django_user_model: Any
) -> None:
    owner = django_user_model.objects.create_user("alice")
    Conversation.objects.create(
        conversation_id=conversation_key(owner, "c1"), owner=owner, title=SPOOF
    )
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, f"report{RLO}fdp.exe", "Quarterly numbers.")

    conversations = admin_client.get("/admin/advisors_app/conversation/").content.decode()
    assert '<td class="field-shown_title"><bdi>invoicefdp.exe</bdi></td>' in conversations
    assert RLO not in shown_text(conversations)

    documents = admin_client.get("/admin/advisors_app/document/").content.decode()
    assert "<bdi>reportfdp.exe</bdi>" in documents
    assert RLO not in shown_text(documents)  # the list, and the source filter's choices
    assert re.search(r'<a href="\?source=[^"]*">reportfdp\.exe</a>', documents), documents


@pytest.mark.django_db
def test_admin_change_pages_title_a_conversation_without_its_override_characters(
    admin_client: Client,
) -> None:
    conversation = Conversation.objects.create(
        conversation_id="1:c1", title="invoice\u202efdp.exe \u2066nested"
    )
    assert str(conversation) == "invoicefdp.exe nested"
    page = admin_client.get(f"/admin/advisors_app/conversation/{conversation.pk}/change/")
    assert page.status_code == 200
    title = re.search(r"<title>(.*?)</title>", page.content.decode(), re.S)
    assert title is not None and "\u202e" not in title.group(1)
