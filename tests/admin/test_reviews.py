"""Reviewer scores in the admin (issue 22, "Feedback"): staff with ``add_score`` rate a reply
from its transcript or its call log, one score per reply, key and reviewer, upserted."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.feedback import (
    CORRECTION,
    FeedbackError,
    parse_vote,
    record_review,
    record_vote,
    withdraw_review,
)
from advisors_app.models import CallLog, ChatMessage, Score
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def reply(django_user_model: Any) -> ChatMessage:
    """Alice's conversation with ``support``: one reply, which she rated 👎."""
    clear_cache()
    alice = django_user_model.objects.create_user("alice", password="pw")
    make_chain("support", model=scripted_model("s", responses=("Refunds take 5 days.",)))
    body = (
        client_for(alice)
        .post("/api/chains/support/call/", {"message": "How long do refunds take?"}, format="json")
        .json()
    )
    record_vote(
        alice, parse_vote({"value": "down", "reason": "wrong"}, message_id=body["message_id"])
    )
    clear_cache()
    return ChatMessage.objects.get(pk=body["message_id"])


def rate_url(reply: ChatMessage) -> str:
    return f"/admin/advisors_app/score/rate/{reply.pk}/"


def reviews(reply: ChatMessage) -> list[Score]:
    return list(reply.scores.filter(source="reviewer").order_by("key"))


def test_a_reviewer_rates_a_reply_and_changes_their_mind(
    admin_client: Client, admin_user: Any, reply: ChatMessage
) -> None:
    page = admin_client.get(rate_url(reply)).content.decode()
    assert "How long do refunds take?" in page and "Refunds take 5 days." in page
    assert "👎" in page and "alice" in page  # the user's vote is shown

    response = admin_client.post(
        rate_url(reply),
        {"key": "thumbs", "value": "down", "reason": "incomplete", "comment": "No bank info."},
    )
    assert response.status_code == 302
    (score,) = reviews(reply)
    assert (score.value, score.reason, score.comment) == (False, "incomplete", "No bank info.")
    assert score.author == admin_user
    log = CallLog.objects.get(trace_id=reply.metadata["trace_id"])
    assert (score.call_log, score.chain_slug) == (log, "support")
    assert score.chain_version_id == log.chain_version_id

    # Again under the same key: the same row, replaced whole; the user's vote stays.
    admin_client.post(rate_url(reply), {"key": "thumbs", "value": "up"})
    (again,) = reviews(reply)
    assert (again.pk, again.value, again.reason, again.comment) == (score.pk, True, "", "")
    assert reply.scores.filter(source="user", value_type="boolean").count() == 1

    # Other keys: a number, a label, a boolean; and a correction.
    for key, value in (("k-num", "0.25"), ("k-lab", "partially_right"), ("k-bool", "false")):
        admin_client.post(rate_url(reply), {"key": key, "value": value})
    admin_client.post(rate_url(reply), {"key": "thumbs", "correction": "Refunds take 10 days."})
    values = {s.key: s.value for s in reviews(reply)}
    assert values == {
        "thumbs": True,  # a blank value keeps the score under its key
        "k-num": 0.25,
        "k-lab": "partially_right",
        "k-bool": False,
        CORRECTION: True,
    }
    assert reply.scores.get(key=CORRECTION).comment == "Refunds take 10 days."
    form = admin_client.get(rate_url(reply) + "?key=thumbs").context["form"]
    assert form.initial["value"] == "up"
    assert form.initial["correction"] == "Refunds take 10 days."

    # A blank correction removes it; "remove" withdraws a key.
    admin_client.post(rate_url(reply), {"key": "thumbs", "correction": ""})
    assert not reply.scores.filter(key=CORRECTION).exists()
    admin_client.post(rate_url(reply), {"key": "k-lab", "withdraw": "1"})
    assert {s.key for s in reviews(reply)} == {"thumbs", "k-num", "k-bool"}


def test_invalid_scores_are_refused_by_field(admin_client: Client, reply: ChatMessage) -> None:
    response = admin_client.post(rate_url(reply), {"key": "thumbs", "value": "maybe"})
    assert response.status_code == 200
    assert "A thumbs vote is true or false" in response.context["form"].errors["value"][0]
    response = admin_client.post(rate_url(reply), {"key": "bad key", "value": "up"})
    assert "key" in response.context["form"].errors
    response = admin_client.post(rate_url(reply), {"key": "x", "value": "1e999"})
    assert "Send a finite number." in response.context["form"].errors["value"]
    assert reviews(reply) == []
    question = ChatMessage.objects.get(conversation=reply.conversation, message_type="user")
    assert admin_client.get(rate_url(question)).status_code == 404
    # Only a safe "next" is followed.
    response = admin_client.post(
        rate_url(reply) + "?next=https://evil.example/", {"key": "thumbs", "value": "up"}
    )
    assert response["Location"] == rate_url(reply)


def test_record_review_upserts_per_reviewer(django_user_model: Any, reply: ChatMessage) -> None:
    one = django_user_model.objects.create_user("one", is_staff=True)
    two = django_user_model.objects.create_user("two", is_staff=True)
    for user, value in ((one, "up"), (two, "down"), (one, "down")):
        record_review(user, parse_vote({"value": value}, message_id=reply.pk))
    assert sorted((s.author.username, s.value) for s in reviews(reply)) == [
        ("one", False),
        ("two", False),
    ]
    assert withdraw_review(one, reply.pk) and not withdraw_review(one, reply.pk)
    with pytest.raises(FeedbackError) as caught:
        record_review(one, parse_vote({"value": "up"}, message_id=10**9))
    assert caught.value.code == "not_found"


def test_rating_needs_add_score(django_user_model: Any, reply: ChatMessage) -> None:
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_score", "view_conversation", "view_chatmessage", "view_calllog"]
        )
    )
    client = Client()
    client.force_login(staff)
    assert client.get(rate_url(reply)).status_code == 403
    assert client.post(rate_url(reply), {"key": "thumbs", "value": "up"}).status_code == 403
    conversation = f"/admin/advisors_app/conversation/{reply.conversation_id}/change/"
    log = CallLog.objects.get(trace_id=reply.metadata["trace_id"])
    log_page = f"/admin/advisors_app/calllog/{log.pk}/change/"
    for page, shown in ((conversation, reply.text), (log_page, reply.metadata["trace_id"])):
        text = client.get(page).content.decode()
        assert shown in text and rate_url(reply) not in text

    staff.user_permissions.add(Permission.objects.get(codename="add_score"))
    client.force_login(staff)  # a fresh permission cache
    for page in (conversation, log_page):
        text = client.get(page).content.decode()
        assert f"{rate_url(reply)}?next=" in text and "thumbs 👎 wrong</bdi> (alice, user)" in text
    response = client.post(rate_url(reply) + f"?next={log_page}", {"value": "up"})
    assert response["Location"] == log_page
    (score,) = reviews(reply)
    assert score.author == staff and score.value is True
