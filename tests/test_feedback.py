"""Votes on replies (issue 22, "Feedback"): parsing, upsert, undo, ownership, what a vote
judges, and the reopened chat page showing the vote."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from advisors_app.api.views.conversations import forget_conversation
from advisors_app.core import AssistantMessage, UserMessage
from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.feedback import (
    MAX_KEYS_PER_REPLY,
    FeedbackError,
    Vote,
    parse_vote,
    record_vote,
    score_payload,
    withdraw_vote,
)
from advisors_app.memory.conversations import conversation_key
from advisors_app.models import CallLog, ChatMessage, Conversation, Score
from advisors_app.stores.memory import DjangoChatMemoryRepository
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def turn(alice: Any) -> dict[str, Any]:
    """One real turn of Alice's on ``support`` (version 1): the call answer's body."""
    clear_cache()
    make_chain(
        model=scripted_model(responses=("Refunds take 5 days.",)),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )
    body = (
        client_for(alice)
        .post("/api/chains/support/call/", {"message": "Refunds?"}, format="json")
        .json()
    )
    clear_cache()
    assert body["stored"] and body["message_id"]
    return body


def vote(message_id: int, value: Any = True, **fields: Any) -> Vote:
    return parse_vote({"value": value, **fields}, message_id=message_id)


# -- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"value": True}, ("thumbs", "boolean", 1.0, "")),
        ({"value": "down"}, ("thumbs", "boolean", 0.0, "")),
        ({"key": "thumbs", "value": "up"}, ("thumbs", "boolean", 1.0, "")),
        ({"key": "helpful", "value": False}, ("helpful", "boolean", 0.0, "")),
        ({"key": "accuracy", "value": 0.75}, ("accuracy", "numeric", 0.75, "")),
        ({"key": "stars", "value": 4}, ("stars", "numeric", 4.0, "")),
        ({"key": "tone", "value": "too formal"}, ("tone", "categorical", None, "too formal")),
    ],
)
def test_values_of_each_kind(data: dict[str, Any], expected: tuple[Any, ...]) -> None:
    parsed = parse_vote(data, message_id=7)
    assert (parsed.key, parsed.value_type, parsed.numeric_value, parsed.string_value) == expected
    assert parsed.message_id == 7 and not parsed.withdraws


@pytest.mark.parametrize(
    ("data", "errors"),
    [
        ({}, {"value": ["This field is required."]}),
        (
            {"value": None},
            {"value": ["This field may not be null: send DELETE to undo a vote."]},
        ),
        ({"value": 1}, {"value": ['A thumbs vote is true or false ("up" or "down").']}),
        ({"value": "meh"}, {"value": ['A thumbs vote is true or false ("up" or "down").']}),
        ({"key": "stars", "value": 1e400}, {"value": ["Send a finite number."]}),
        ({"key": "stars", "value": 10**400}, {"value": ["Send a finite number."]}),
        ({"key": "tone", "value": " "}, {"value": ["Send a non-blank label."]}),
        (
            {"key": "tone", "value": "x" * 101},
            {"value": ["Use a label of at most 100 characters."]},
        ),
        (
            {"key": "tone", "value": [1]},
            {"value": ["Send true or false, a number or a short label."]},
        ),
        (
            {"key": "thumbs up", "value": True},
            {
                "key": [
                    "Use a key of at most 64 letters, digits, hyphens and underscores "
                    '(e.g. "thumbs").'
                ]
            },
        ),
        (
            {"value": False, "reason": "rude"},
            {
                "reason": [
                    "Use one of wrong, incomplete, unhelpful, unsafe, other, or leave it out."
                ]
            },
        ),
        ({"value": False, "comment": 5}, {"comment": ["Send the comment as text."]}),
        (
            {"value": False, "comment": "x" * 2001},
            {"comment": ["Use at most 2000 characters (2001 sent)."]},
        ),
        (
            {"value": True, "score": 1},
            {"score": ["Unknown field. Known fields: key, value, reason, comment."]},
        ),
    ],
)
def test_refused_votes_name_each_field(data: dict[str, Any], errors: dict[str, Any]) -> None:
    with pytest.raises(FeedbackError) as refused:
        parse_vote(data, message_id=7)
    assert (refused.value.code, refused.value.http_status) == ("invalid", 400)
    assert refused.value.errors == errors


def test_every_field_error_is_reported_at_once() -> None:
    with pytest.raises(FeedbackError) as refused:
        parse_vote(
            {"type": "feedback", "message_id": "7", "key": "", "reason": "x", "comment": "\x00"},
            envelope=("type",),
            allow_withdraw=True,
        )
    assert set(refused.value.errors) == {"message_id", "key", "value", "reason", "comment"}


def test_a_frame_names_its_message_and_may_withdraw() -> None:
    parsed = parse_vote(
        {"type": "feedback", "message_id": 9, "value": None},
        envelope=("type",),
        allow_withdraw=True,
    )
    assert parsed == Vote(9, "thumbs", None) and parsed.withdraws
    with pytest.raises(FeedbackError) as refused:
        parse_vote({"value": True}, allow_withdraw=True)
    assert refused.value.errors == {"message_id": ["This field is required."]}
    with pytest.raises(FeedbackError) as refused:
        parse_vote({"message_id": True, "value": True})
    assert refused.value.errors == {
        "message_id": ["Send the id of a reply (the message_id of its done frame)."]
    }


# -- storing ---------------------------------------------------------------------------------


def test_a_vote_is_upserted_changed_and_undone(alice: Any, turn: dict[str, Any]) -> None:
    reply = turn["message_id"]
    score, created = record_vote(alice, vote(reply, "down", reason="wrong", comment="Not 5."))
    assert created and score is not None
    assert (score.value, score.reason, score.comment, score.source) == (
        False,
        "wrong",
        "Not 5.",
        "user",
    )

    changed, created = record_vote(alice, vote(reply, True))
    assert not created and changed is not None and changed.pk == score.pk
    # A vote replaces the whole vote: the reason and comment not sent are cleared.
    assert (changed.value, changed.reason, changed.comment) == (True, "", "")
    assert Score.objects.count() == 1

    other, created = record_vote(alice, vote(reply, 0.5, key="accuracy"))
    assert created and other is not None and other.value == 0.5
    assert Score.objects.count() == 2

    assert withdraw_vote(alice, reply) is True
    assert withdraw_vote(alice, reply) is False  # undoing twice is not an error
    assert list(Score.objects.values_list("key", flat=True)) == ["accuracy"]
    assert record_vote(alice, Vote(reply, "accuracy", None)) == (None, False)
    assert not Score.objects.exists()


def test_a_reply_takes_a_bounded_number_of_keys(alice: Any, turn: dict[str, Any]) -> None:
    reply = turn["message_id"]
    for index in range(MAX_KEYS_PER_REPLY):
        record_vote(alice, vote(reply, index, key=f"k{index}"))
    with pytest.raises(FeedbackError) as refused:
        record_vote(alice, vote(reply, 1, key="one_more"))
    assert refused.value.errors == {
        "key": ["You rated this reply under 10 keys already: undo one."]
    }
    record_vote(alice, vote(reply, 5, key="k0"))  # changing one is fine
    withdraw_vote(alice, reply, "k1")
    record_vote(alice, vote(reply, 1, key="one_more"))
    assert Score.objects.count() == MAX_KEYS_PER_REPLY


def test_a_vote_judges_the_turn_that_wrote_the_reply(alice: Any, turn: dict[str, Any]) -> None:
    score, _ = record_vote(alice, vote(turn["message_id"], True))
    assert score is not None
    log = CallLog.objects.get(trace_id=turn["trace_id"])
    score.refresh_from_db()
    assert score.call_log == log
    assert score.chain_version is not None and score.chain_version == log.chain_version
    assert (score.chain_version.number, score.chain_slug, score.author) == (1, "support", alice)
    assert score.message_id == turn["message_id"]
    payload = score_payload(score)
    assert set(payload) == {
        "id",
        "message_id",
        "key",
        "value",
        "value_type",
        "reason",
        "comment",
        "source",
        "created_at",
        "updated_at",
    }
    assert (payload["value"], payload["value_type"]) == (True, "boolean")


def test_a_reply_without_a_call_log_is_rated_with_empty_links(alice: Any) -> None:
    key = conversation_key(alice, "old")
    Conversation.objects.create(conversation_id=key, owner=alice)
    DjangoChatMemoryRepository().append(key, [UserMessage("Hi"), AssistantMessage("Hello")])
    reply = ChatMessage.objects.get(message_type="assistant")
    score, _ = record_vote(alice, vote(reply.pk, True))
    assert score is not None
    assert (score.call_log, score.chain_version, score.chain_slug) == (None, None, "")


def test_only_the_owner_rates_and_only_replies(alice: Any, bob: Any, turn: dict[str, Any]) -> None:
    reply = turn["message_id"]
    for attempt in (
        lambda: record_vote(bob, vote(reply, True)),
        lambda: withdraw_vote(bob, reply),
        lambda: record_vote(alice, vote(10**30, True)),  # beyond any id: not found either
        lambda: record_vote(alice, vote(-1, True)),
    ):
        with pytest.raises(FeedbackError) as refused:
            attempt()
        assert (refused.value.code, refused.value.http_status) == ("not_found", 404)
    question = ChatMessage.objects.get(message_type="user")
    with pytest.raises(FeedbackError) as refused:
        record_vote(alice, vote(question.pk, True))
    assert refused.value.errors == {"message_id": ["Only the assistant's replies can be rated."]}
    assert not Score.objects.exists()


def test_forgetting_a_conversation_forgets_its_votes(alice: Any, turn: dict[str, Any]) -> None:
    record_vote(alice, vote(turn["message_id"], False, comment="Private remark"))
    conversation = Conversation.objects.get()
    forget_conversation(alice, conversation)
    assert not Score.objects.exists()
    assert CallLog.objects.count() == 1  # the log stays


# -- the chat page ---------------------------------------------------------------------------


def test_a_reopened_reply_carries_the_owners_vote(alice: Any, turn: dict[str, Any]) -> None:
    record_vote(alice, vote(turn["message_id"], "down", reason="incomplete"))
    client = Client()
    client.force_login(alice)
    response = client.get(f"/chat/c/{turn['conversation_id']}/")
    details = response.context["replies"][str(turn["message_id"])]
    assert details["feedback"] == {
        "thumbs": {"value": False, "reason": "incomplete", "comment": ""}
    }
    assert response.context["config"]["feedbackReasons"][0] == ["wrong", "Wrong or made up"]
    withdraw_vote(alice, turn["message_id"])
    again = client.get(f"/chat/c/{turn['conversation_id']}/").context["replies"]
    assert "feedback" not in again[str(turn["message_id"])]
