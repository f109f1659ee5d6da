"""Session memory in the conversation admin: boundaries in the transcript, "Compact now"."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission
from django.contrib.messages import get_messages
from django.test import Client

from advisors_app.admin.sessions import FOLD_SUMMARY_CHARS
from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.models import ChatMessage, Conversation, ConversationBoundary
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.turn import call_turn
from tests.factories import make_chain, scripted_model

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("fresh_chain_cache")]

CHANGELIST = "/admin/advisors_app/conversation/"
WINDOW = {"trigger": {"kind": "turns", "threshold": 50}, "strategy": "window", "keep_last_turns": 1}
SCRIPT = "<script>alert('summary')</script>"


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def page(client: Client, conversation: Conversation) -> str:
    response = client.get(f"{CHANGELIST}{conversation.pk}/change/")
    assert response.status_code == 200
    return str(response.content.decode())


def chat(user: Any, chain: str, *texts: str) -> Conversation:
    """One conversation of ``user`` on ``chain``, a turn per text."""
    key = None
    for text in texts:
        key = async_to_sync(call_turn)(chain, user, text, conversation_id=key).conversation_id
    return Conversation.objects.get(conversation_id=f"{user.pk}:{key}")


def staff(django_user_model: Any, *codenames: str) -> Client:
    user = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    user.user_permissions.add(
        *Permission.objects.filter(content_type__app_label="advisors_app", codename__in=codenames)
    )
    client = Client()
    client.force_login(user)
    return client


def told(response: Any) -> list[tuple[str, str]]:
    return [(m.level_tag, m.message) for m in get_messages(response.wsgi_request)]


def test_boundaries_show_after_the_message_they_cover_escaped_and_folded_when_long(
    admin_client: Client, alice: Any
) -> None:
    conversation = Conversation.objects.create(conversation_id=f"{alice.pk}:c", owner=alice)
    DjangoChatMemoryRepository().append(
        conversation.conversation_id,
        [
            message
            for n in ("first", "second", "third")
            for message in (UserMessage(f"{n} question"), AssistantMessage(f"{n} answer"))
        ],
    )
    usage = {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17}
    ConversationBoundary.objects.create(
        conversation=conversation, covers_up_to=2, summary=f"Short {SCRIPT}", model="summ-1",
        usage=usage,
    )  # fmt: skip
    long_summary = "Alice asked two questions. " + "word " * FOLD_SUMMARY_CHARS
    ConversationBoundary.objects.create(
        conversation=conversation, covers_up_to=4, summary=long_summary, model="summ-2"
    )
    html = page(admin_client, conversation)
    assert html.count('class="boundary-row"') == 2
    # In place: each right after the last message it covers.
    order = [
        html.index("first answer"),
        html.index("summ-1"),
        html.index("second question"),
        html.index("second answer"),
        html.index("summ-2"),
        html.index("third question"),
    ]
    assert order == sorted(order)
    assert "Compaction</strong> up to message #2" in html
    assert "12 prompt + 5 completion = 17 tokens" in html
    # Escaped: the summary is text, never markup.
    assert SCRIPT not in html
    assert "Short &lt;script&gt;alert(&#x27;summary&#x27;)&lt;/script&gt;" in html
    # The long one is folded: its first words in the <summary>, the whole text inside.
    assert '<details class="boundary-summary"><summary>Summary: Alice asked two questions.' in html
    assert html.count('<details class="boundary-summary">') == 1
    assert long_summary.strip() in html


def test_the_action_reports_each_conversation_and_never_changes_a_message(
    admin_client: Client, alice: Any
) -> None:
    make_chain("s", advisors=(("session_memory", WINDOW),))
    make_chain("plain", advisors=(("message_chat_memory", {}),))
    summarize = {**WINDOW, "strategy": "summarize", "summary_model": "mute"}
    scripted_model("mute", responses=(), repeat=False)  # an exhausted script raises
    make_chain("broken", advisors=(("session_memory", summarize),))
    long = chat(alice, "s", "one", "two", "three")
    short = chat(alice, "s", "only")
    plain = chat(alice, "plain", "hi")
    broken = chat(alice, "broken", "a", "b")
    before = list(ChatMessage.objects.order_by("pk").values_list("pk", "sequence", "text"))

    selected = [long.pk, short.pk, plain.pk, broken.pk]
    response = admin_client.post(
        CHANGELIST, {"action": "compact_selected", "_selected_action": selected}, follow=True
    )
    assert response.status_code == 200
    name = {
        c.pk: f"Conversation {c.conversation_id.partition(':')[2]}"
        for c in (long, short, plain, broken)
    }
    assert told(response) == [
        ("success", f"{name[long.pk]}: compacted up to message #4 (4 messages left the "
                    "model's view)."),
        ("info", f"{name[short.pk]}: nothing to compact (only the turns kept verbatim)."),
        ("warning", f"{name[plain.pk]}: not compacted, its chain has no session memory (no "
                    "session_memory advisor in the version it started on)."),
        ("error", f"{name[broken.pk]}: compaction failed: AdvisorStateError: "
                  "ScriptedChatModel script is exhausted after 0 response(s)"),
    ]  # fmt: skip
    assert [(b.conversation_id, b.covers_up_to) for b in ConversationBoundary.objects.all()] == [
        (long.pk, 4)
    ]
    after = list(ChatMessage.objects.order_by("pk").values_list("pk", "sequence", "text"))
    assert after == before
    # The transcript shows it in place.
    html = page(admin_client, long)
    assert html.index("two") < html.index('class="boundary-row"') < html.index("three")


def test_the_button_compacts_one_conversation_by_post(admin_client: Client, alice: Any) -> None:
    make_chain("s", advisors=(("session_memory", WINDOW),))
    conversation = chat(alice, "s", "one", "two")
    url = f"{CHANGELIST}{conversation.pk}/compact/"
    html = page(admin_client, conversation)
    assert f'action="{url}"' in html and ">Compact now</button>" in html
    assert admin_client.get(url).status_code == 405
    response = admin_client.post(url)
    assert response.status_code == 302
    assert response.url == f"{CHANGELIST}{conversation.pk}/change/"
    assert told(response) == [
        ("success", f"Conversation {conversation.conversation_id.partition(':')[2]}: compacted "
                    "up to message #2 (2 messages left the model's view).")
    ]  # fmt: skip
    assert ConversationBoundary.objects.get().covers_up_to == 2
    assert admin_client.post(f"{CHANGELIST}999999/compact/").status_code == 302  # gone: listed


def test_the_shown_message_quotes_the_conversation_id_as_it_is(
    admin_client: Client, alice: Any
) -> None:
    make_chain("s", advisors=(("session_memory", WINDOW),))
    key = async_to_sync(call_turn)("s", alice, "one", conversation_id="rest-long-1").conversation_id
    conversation = Conversation.objects.get(conversation_id=f"{alice.pk}:{key}")
    response = admin_client.post(f"{CHANGELIST}{conversation.pk}/compact/", follow=True)
    html = response.content.decode()
    # The admin's template capitalises each message's first letter (capfirst).
    assert "Conversation rest-long-1: nothing to compact" in html
    assert "Rest-long-1" not in html


def test_compacting_needs_the_change_permission_on_conversations(
    django_user_model: Any, alice: Any
) -> None:
    make_chain("s", advisors=(("session_memory", WINDOW),))
    conversation = chat(alice, "s", "one", "two")
    viewer = staff(django_user_model, "view_conversation", "view_chatmessage")
    url = f"{CHANGELIST}{conversation.pk}/compact/"
    assert "Compact now" not in page(viewer, conversation)
    assert "compact_selected" not in viewer.get(CHANGELIST).content.decode()
    assert viewer.post(url).status_code == 403
    refused = viewer.post(
        CHANGELIST, {"action": "compact_selected", "_selected_action": [conversation.pk]}
    )
    assert refused.status_code in (200, 302)  # Django: "No action selected", nothing run
    assert not ConversationBoundary.objects.exists()

    viewer.logout()
    editor = Client()
    editor.force_login(viewer_user := django_user_model.objects.get(username="staff"))
    viewer_user.user_permissions.add(Permission.objects.get(codename="change_conversation"))
    assert ">Compact now</button>" in page(editor, conversation)
    assert "compact_selected" in editor.get(CHANGELIST).content.decode()
    response = editor.post(
        CHANGELIST, {"action": "compact_selected", "_selected_action": [conversation.pk]}
    )
    assert response.status_code == 302
    assert ConversationBoundary.objects.get().covers_up_to == 2
    # The change permission opens "compact now" only: the page stays read-only.
    assert 'name="_save"' not in page(editor, conversation)
