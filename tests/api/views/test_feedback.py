"""``PUT`` / ``DELETE /api/messages/<id>/feedback/`` (issue 22): upsert, undo, ownership,
the error shape, the conversation API showing the caller's vote, and a vote on a streamed
reply right after its ``done`` event."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from advisors_app.definition.runtime import load_chain
from advisors_app.models import CallLog, ChatMessage, Score
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def reply(api: APIClient) -> dict[str, Any]:
    """One turn of Alice's on ``support``: the call answer's body."""
    make_chain(model=scripted_model(responses=("Refunds take 5 days.",)))
    body = api.post("/api/chains/support/call/", {"message": "Refunds?"}, format="json").json()
    assert body["stored"]
    return body


def feedback_url(message_id: int | str) -> str:
    return f"/api/messages/{message_id}/feedback/"


def test_a_vote_is_created_changed_and_undone(api: APIClient, reply: dict[str, Any]) -> None:
    url = feedback_url(reply["message_id"])
    created = api.put(url, {"key": "thumbs", "value": "down", "reason": "wrong"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert body == {
        "id": body["id"],
        "message_id": reply["message_id"],
        "key": "thumbs",
        "value": False,
        "value_type": "boolean",
        "reason": "wrong",
        "comment": "",
        "source": "user",
        "created_at": body["created_at"],
        "updated_at": body["updated_at"],
    }
    changed = api.put(url, {"value": True, "comment": "Right after all."}, format="json")
    assert changed.status_code == 200
    assert (changed.json()["id"], changed.json()["value"], changed.json()["reason"]) == (
        body["id"],
        True,
        "",
    )
    assert changed.json()["comment"] == "Right after all."
    assert api.put(url, {"key": "accuracy", "value": 0.8}, format="json").status_code == 201
    assert Score.objects.count() == 2

    assert api.delete(url).status_code == 204
    assert api.delete(url).status_code == 204  # nothing left to undo: still 204
    assert list(Score.objects.values_list("key", flat=True)) == ["accuracy"]
    assert api.delete(url + "?key=accuracy").status_code == 204
    assert not Score.objects.exists()


def test_another_users_reply_is_a_404_and_a_question_a_400(
    api: APIClient, bob: Any, reply: dict[str, Any]
) -> None:
    url = feedback_url(reply["message_id"])
    for response in (
        client_for(bob).put(url, {"value": True}, format="json"),
        client_for(bob).delete(url),
        api.put(feedback_url(10**30), {"value": True}, format="json"),
    ):
        assert response.status_code == 404, response.content
        assert response.json()["error"]["code"] == "not_found"
        assert response.json()["error"]["message"] == "No reply of yours has this id."
    question = ChatMessage.objects.get(message_type="user")
    refused = api.put(feedback_url(question.pk), {"value": True}, format="json")
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {
        "message_id": ["Only the assistant's replies can be rated."]
    }
    assert not Score.objects.exists()
    assert client_for(None).put(url, {"value": True}, format="json").status_code == 401
    assert api.get(url).status_code == 405


def test_refused_bodies_answer_400_with_every_field(api: APIClient, reply: dict[str, Any]) -> None:
    url = feedback_url(reply["message_id"])
    response = api.put(
        url, {"value": None, "reason": "rude", "comment": 3, "extra": 1}, format="json"
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], error["message"]) == ("invalid", "The feedback is invalid.")
    assert set(error["fields"]) == {"value", "reason", "comment", "extra"}
    assert api.put(url, [True], format="json").json()["error"]["fields"] == {
        "non_field_errors": ["Send a JSON object."]
    }
    assert api.put(url, "value=1", content_type="text/plain").status_code == 415
    bad_key = api.delete(url + "?key=no%20spaces")
    assert bad_key.status_code == 400 and set(bad_key.json()["error"]["fields"]) == {"key"}
    assert not Score.objects.exists()


def test_the_conversation_shows_the_callers_votes(api: APIClient, reply: dict[str, Any]) -> None:
    detail = f"/api/conversations/{reply['conversation_id']}/"
    assert [m["feedback"] for m in api.get(detail).json()["messages"]] == [{}, {}]
    api.put(
        feedback_url(reply["message_id"]), {"value": "down", "reason": "unhelpful"}, format="json"
    )
    api.put(feedback_url(reply["message_id"]), {"key": "tone", "value": "curt"}, format="json")
    question, answer = api.get(detail).json()["messages"]
    assert question["feedback"] == {}
    assert answer["feedback"] == {
        "thumbs": {"value": False, "reason": "unhelpful", "comment": ""},
        "tone": {"value": "curt", "reason": "", "comment": ""},
    }


def test_a_streamed_reply_is_rated_right_after_done(api: APIClient, alice: Any) -> None:
    make_chain(model=scripted_model(responses=(), repeat=False))
    load_chain("support").client.chat_model.add(["Five ", "days."])  # type: ignore[attr-defined]
    response = api.post("/api/chains/support/stream/", {"message": "Refunds?"}, format="json")
    events = parse_sse(read_stream(response))
    done = events[-1][1]
    assert (done["type"], done["content"]) == ("done", "Five days.")
    rated = api.put(feedback_url(done["message_id"]), {"value": True}, format="json")
    assert rated.status_code == 201, rated.content
    score = Score.objects.get()
    assert score.call_log == CallLog.objects.get(trace_id=done["trace_id"])
    assert (score.call_log.mode, score.chain_slug, score.author) == ("stream", "support", alice)
