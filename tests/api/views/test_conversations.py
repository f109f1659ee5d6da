"""Conversations over REST: the caller's own only; rename; delete forgets the memory too."""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.core.vectorstore import Document as CoreDocument
from advisors_app.memory.compaction import compact_now
from advisors_app.models import (
    ChatMessage,
    Collection,
    Conversation,
    ConversationBoundary,
    Document,
)
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.stores.vectors import PgVectorStore
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db

repository = DjangoChatMemoryRepository()


def conversation(user: Any, public_id: str, title: str, *texts: str) -> Conversation:
    key = f"{user.pk}:{public_id}"
    row = Conversation.objects.create(conversation_id=key, owner=user, title=title)
    messages = [
        (UserMessage if i % 2 == 0 else AssistantMessage)(text) for i, text in enumerate(texts)
    ]
    if messages:
        repository.append(key, messages)
    return row


@pytest.fixture
def chats(alice: Any, bob: Any) -> None:
    conversation(alice, "older", "Older", "hi", "hello")
    conversation(alice, "trip", "Trip", "Where to?", "Oslo.", "When?", "June.")
    conversation(bob, "trip", "Bob's trip", "secret plans", "noted")


def test_the_list_holds_the_callers_conversations_only(chats: None, api: Any, bob: Any) -> None:
    body = api.get("/api/conversations/").json()
    assert body["count"] == 2
    assert [(c["id"], c["title"]) for c in body["results"]] == [
        ("trip", "Trip"),
        ("older", "Older"),
    ]
    assert set(body["results"][0]) == {"id", "title", "created_at", "updated_at"}
    theirs = client_for(bob).get("/api/conversations/").json()
    assert [c["title"] for c in theirs["results"]] == ["Bob's trip"]
    assert api.get("/api/conversations/", {"page": 9}).status_code == 404
    assert client_for(None).get("/api/conversations/").status_code == 401


def test_a_conversation_is_shown_with_its_messages_in_order(chats: None, api: Any) -> None:
    body = api.get("/api/conversations/trip/").json()
    assert (body["id"], body["title"]) == ("trip", "Trip")
    assert [(m["sequence"], m["type"], m["text"]) for m in body["messages"]] == [
        (1, "user", "Where to?"),
        (2, "assistant", "Oslo."),
        (3, "user", "When?"),
        (4, "assistant", "June."),
    ]
    assert api.get("/api/conversations/nope/").status_code == 404
    assert api.get("/api/conversations/bad%20id/").status_code == 404


def test_the_detail_shows_boundaries_and_leaves_the_messages_as_they_were(
    chats: None, alice: Any, bob: Any, api: Any
) -> None:
    assert api.get("/api/conversations/trip/").json()["boundaries"] == []
    window = {"trigger": {"kind": "turns", "threshold": 50}, "strategy": "window"}
    make_chain("s", advisors=(("session_memory", {**window, "keep_last_turns": 1}),))
    first = api.post("/api/chains/s/call/", {"message": "one"}, format="json").json()
    public = first["conversation_id"]
    api.post("/api/chains/s/call/", {"message": "two", "conversation_id": public}, format="json")
    before = api.get(f"/api/conversations/{public}/").json()
    compact_now(f"{alice.pk}:{public}")
    row = Conversation.objects.get(conversation_id=f"{alice.pk}:{public}")
    usage = {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}
    ConversationBoundary.objects.create(
        conversation=row, covers_up_to=3, summary="<script>alert(1)</script> said one, two",
        model="summarizer", usage=usage,
    )  # fmt: skip
    body = api.get(f"/api/conversations/{public}/").json()
    assert body["messages"] == before["messages"]  # unchanged, all four
    assert [m["text"] for m in body["messages"]] == ["one", "Hello!", "two", "Hello!"]
    window_boundary, summary_boundary = body["boundaries"]  # oldest first
    assert set(window_boundary) == {
        "kind", "covers_up_to", "summary", "model", "usage", "created_at"
    }  # fmt: skip
    assert window_boundary | {"created_at": None} == {
        "kind": "compaction", "covers_up_to": 2, "summary": "", "model": "", "usage": None,
        "created_at": None,
    }  # fmt: skip
    assert summary_boundary["covers_up_to"] == 3 and summary_boundary["usage"] == usage
    # JSON carries the text as stored: escaping is for whoever renders it as HTML.
    assert summary_boundary["summary"] == "<script>alert(1)</script> said one, two"
    assert client_for(bob).get(f"/api/conversations/{public}/").status_code == 404


def test_the_schema_documents_boundaries(api: Any) -> None:
    schemas = api.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    detail = schemas["ConversationDetail"]["properties"]
    assert detail["boundaries"]["items"] == {"$ref": "#/components/schemas/ConversationBoundary"}
    assert detail["messages"]["items"] == {"$ref": "#/components/schemas/ConversationMessage"}
    boundary = schemas["ConversationBoundary"]
    assert set(boundary["properties"]) == {
        "kind", "covers_up_to", "summary", "model", "usage", "created_at"
    }  # fmt: skip
    assert set(boundary["required"]) == set(boundary["properties"])
    usage = boundary["properties"]["usage"]
    assert usage["nullable"] is True
    assert usage["allOf"] == [{"$ref": "#/components/schemas/Usage"}]


def test_a_reopened_conversation_names_its_reply_by_the_answers_message_id(api: Any) -> None:
    make_chain(model=scripted_model("ids", responses=("Stored.",)))
    answer = api.post("/api/chains/support/call/", {"message": "hi"}, format="json").json()
    body = api.get(f"/api/conversations/{answer['conversation_id']}/").json()
    [reply] = [m for m in body["messages"] if m["type"] == "assistant"]
    assert (reply["id"], reply["text"]) == (answer["message_id"], "Stored.")


def test_another_users_conversation_answers_404_and_stays_untouched(
    chats: None, alice: Any, bob: Any
) -> None:
    intruder = client_for(bob)
    # Bob's own "trip" is what he reaches; Alice's "older" does not exist for him.
    assert intruder.get("/api/conversations/trip/").json()["title"] == "Bob's trip"
    for method in ("get", "patch", "delete"):
        response = getattr(intruder, method)("/api/conversations/older/", {"title": "x"})
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    older = Conversation.objects.get(conversation_id=f"{alice.pk}:older")
    assert older.title == "Older" and older.messages.count() == 2


def test_renaming_a_conversation(chats: None, alice: Any, api: Any) -> None:
    response = api.patch("/api/conversations/trip/", {"title": "Norway"}, format="json")
    assert response.status_code == 200
    assert response.json()["title"] == "Norway"
    assert Conversation.objects.get(conversation_id=f"{alice.pk}:trip").title == "Norway"
    too_long = api.patch("/api/conversations/trip/", {"title": "x" * 201}, format="json")
    assert too_long.status_code == 400
    assert too_long.json()["error"]["fields"] == {
        "title": ["Ensure this field has no more than 200 characters."]
    }
    # Before: DRF stored a number as its text (found by an acceptance pass).
    for wrong in (42, True, ["a"]):
        refused = api.patch("/api/conversations/trip/", {"title": wrong}, format="json")
        assert refused.status_code == 400
        assert refused.json()["error"]["fields"] == {"title": ["Not a valid string."]}
    assert Conversation.objects.get(conversation_id=f"{alice.pk}:trip").title == "Norway"


def test_a_patch_with_fields_it_cannot_change_is_refused_whole(
    chats: None, alice: Any, api: Any
) -> None:
    """Issue 36: unknown fields were ignored (the title changed, the rest silently dropped)."""
    body = {"title": "Oslo", "titel": "typo", "id": "other", "created_at": "2020-01-01"}
    refused = api.patch("/api/conversations/trip/", body, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == "invalid"
    assert refused.json()["error"]["fields"] == {
        "created_at": ["This field is read-only."],
        "id": ["This field is read-only."],
        "titel": ["Unknown field."],
    }
    assert Conversation.objects.get(conversation_id=f"{alice.pk}:trip").title == "Trip"
    assert api.patch("/api/conversations/trip/", {}, format="json").status_code == 200


def test_deleting_a_conversation_forgets_its_messages_and_long_term_memory(
    chats: None, alice: Any, bob: Any, api: Any
) -> None:
    key = f"{alice.pk}:trip"
    memory = Collection.objects.create(slug="memory", name="Memory")
    PgVectorStore(memory, owner=alice).add(
        [
            CoreDocument("Alice flies to Oslo in June.", {"conversationId": key}),
            CoreDocument("Alice likes tea.", {"conversationId": f"{alice.pk}:older"}),
        ]
    )
    assert api.delete("/api/conversations/trip/").status_code == 204
    assert not Conversation.objects.filter(conversation_id=key).exists()
    assert not ChatMessage.objects.filter(conversation__conversation_id=key).exists()
    assert list(Document.objects.values_list("content", flat=True)) == ["Alice likes tea."]
    assert Conversation.objects.filter(owner=bob, conversation_id=f"{bob.pk}:trip").exists()
    assert api.delete("/api/conversations/trip/").status_code == 404
