"""``GET /api/conversations/<id>/search/``: the caller's own conversation only, field errors,
snippets and the websearch syntax."""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.core.messages import ToolResponse, ToolResponseMessage
from advisors_app.memory.recall import MAX_LIMIT, MAX_QUERY_CHARS
from advisors_app.models import ChatMessage, Conversation
from advisors_app.stores.memory import DjangoChatMemoryRepository
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db

repository = DjangoChatMemoryRepository()


def conversation(user: Any, public_id: str, *messages: Any) -> Conversation:
    key = f"{user.pk}:{public_id}"
    row = Conversation.objects.create(conversation_id=key, owner=user, title=public_id)
    repository.append(key, list(messages))
    return row


@pytest.fixture
def chats(alice: Any, bob: Any) -> None:
    conversation(
        alice,
        "trip",
        UserMessage("Book the hotel in Oslo for June, near the harbour."),
        AssistantMessage("Booked: Harbour Hotel, Oslo, June 3 to June 7."),
        UserMessage("And the train from Oslo to Bergen?"),
        ToolResponseMessage((ToolResponse("c1", "timetable", "Oslo Bergen 08:25 daily"),)),
        AssistantMessage("The Bergen line leaves Oslo at 08:25 every day."),
    )
    conversation(bob, "trip", UserMessage("My secret Oslo plans."))
    conversation(bob, "other", UserMessage("Oslo again."))


def search(client: Any, public_id: str, **params: Any) -> Any:
    return client.get(f"/api/conversations/{public_id}/search/", params)


def test_hits_come_best_first_with_their_snippets(chats: None, api: Any, alice: Any) -> None:
    response = search(api, "trip", q="oslo hotel")
    assert response.status_code == 200
    [first, second] = response.json()
    assert set(first) == {"message_id", "sequence", "role", "snippet", "rank", "created_at"}
    stored = ChatMessage.objects.get(conversation__owner=alice, sequence=1)
    assert (first["message_id"], first["sequence"], first["role"]) == (stored.pk, 1, "user")
    assert first["snippet"] == "Book the **hotel** in **Oslo** for June, near the harbour."
    assert (second["sequence"], second["role"]) == (2, "assistant")
    assert second["snippet"] == "Booked: Harbour **Hotel**, **Oslo**, June 3 to June 7."
    assert first["rank"] >= second["rank"] > 0
    assert first["created_at"].endswith("Z") or "+" in first["created_at"]


def test_the_limit_and_what_is_not_searched(chats: None, api: Any) -> None:
    hits = search(api, "trip", q="oslo").json()
    # The tool response (sequence 4) quotes Oslo too but is not searched.
    assert sorted(h["sequence"] for h in hits) == [1, 2, 3, 5]
    assert len(search(api, "trip", q="oslo", limit=2).json()) == 2
    assert search(api, "trip", q="daily").json() == []


def test_websearch_syntax(chats: None, api: Any) -> None:
    def found(q: str) -> list[int]:
        return sorted(h["sequence"] for h in search(api, "trip", q=q).json())

    assert found('"harbour hotel"') == [2]
    assert found('"hotel harbour"') == []
    assert found("oslo -june") == [3, 5]
    assert found("bergen or harbour") == [1, 2, 3, 5]
    # Without syntax, any of the words will do when no message has them all, then a substring.
    assert found("bergen submarine") == [3, 5]
    [partial] = search(api, "trip", q="ARBOUR H").json()
    assert partial["sequence"] == 2 and partial["rank"] == 0
    assert partial["snippet"] == "Booked: H**arbour H**otel, Oslo, June 3 to June 7."


def test_only_the_callers_own_conversation(chats: None, api: Any, alice: Any, bob: Any) -> None:
    # Bob's "trip" is his own conversation; Alice's "trip" stays out of his reach.
    theirs = search(client_for(bob), "trip", q="oslo").json()
    assert [h["snippet"] for h in theirs] == ["My secret **Oslo** plans."]
    assert search(api, "other", q="oslo").status_code == 404
    assert search(api, "nope", q="oslo").status_code == 404
    assert search(api, "bad%20id", q="oslo").status_code == 404
    assert search(client_for(None), "trip", q="oslo").status_code == 401
    # Owning the conversation is all a read needs: no model permission.
    assert not alice.user_permissions.exists() and not alice.is_staff
    # An unknown id answers 404 before the query is even looked at.
    assert search(api, "nope", q="").status_code == 404


@pytest.mark.parametrize(
    ("params", "field", "message"),
    [
        ({}, "q", "This field is required."),
        ({"q": ""}, "q", "This field may not be blank."),
        ({"q": "   "}, "q", "This field may not be blank."),
        ({"q": "x" * (MAX_QUERY_CHARS + 1)}, "q", f"no more than {MAX_QUERY_CHARS} characters"),
        ({"q": "oslo", "limit": 0}, "limit", "greater than or equal to 1"),
        ({"q": "oslo", "limit": MAX_LIMIT + 1}, "limit", f"less than or equal to {MAX_LIMIT}"),
        ({"q": "oslo", "limit": "many"}, "limit", "A valid integer is required."),
        ({"q": "os\x00lo"}, "q", "NUL"),
    ],
)
def test_bad_parameters_answer_400_naming_the_field(
    chats: None, api: Any, params: Any, field: str, message: str
) -> None:
    response = search(api, "trip", **params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid"
    assert message.lower() in " ".join(error["fields"][field]).lower()


def test_a_conversation_without_matches_answers_an_empty_list(chats: None, api: Any) -> None:
    assert search(api, "trip", q="submarine").json() == []
    hotel = search(api, "trip", q="hotel submarine").json()
    assert [h["sequence"] for h in hotel] == [1, 2]
    assert search(api, "trip", q='"hotel submarine"').json() == []
