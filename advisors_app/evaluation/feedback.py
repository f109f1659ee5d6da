"""Feedback on answers: a user's vote on one of their replies, upserted (issue 22, "Feedback").

The one place that validates and stores a vote, for every transport: ``PUT`` / ``DELETE
/api/messages/<message_id>/feedback/`` (:mod:`advisors_app.api.views.feedback`) and the chat
websocket's ``feedback`` frame (:mod:`advisors_app.channels.consumers`), which the chat page's 👍/👎
send. A vote is a :class:`~advisors_app.models.Score` with ``source="user"``:

- **Who**: the owner of the conversation the message belongs to, on the assistant's replies
  only. Another user's message answers ``not_found`` (404), as an id never used (conversations
  behave the same: :mod:`advisors_app.memory.conversations`); one of the caller's own user messages
  is ``invalid`` (400, field ``message_id``). No Django model permission is asked: rating
  one's own replies is part of chatting, which needs only a signed-in user.
- **What**: ``{"key"?, "value", "reason"?, "comment"?}``. ``key`` (default ``"thumbs"``) is a
  slug of at most 64 characters. A ``"thumbs"`` value is ``true``/``false`` or ``"up"``/
  ``"down"``; any other key takes a boolean, a finite number or a short label (at most 100
  characters), stored as the score's boolean, numeric or categorical value. ``reason`` is one of
  :data:`~advisors_app.models.scores.REASONS` (``wrong``, ``incomplete``, ``unhelpful``,
  ``unsafe``, ``other``) or blank; ``comment`` free text of at most 2000 characters. Unknown
  fields are refused, and every field error is reported at once.
- **Upsert**: one vote per (message, key, author): voting again replaces the whole vote (a
  reason or comment not sent is cleared); ``DELETE`` (or the frame's ``"value": null``) undoes
  it, and undoing a vote that is not there is not an error. A user rates one reply under at
  most :data:`MAX_KEYS_PER_REPLY` (10) keys.
- **What it judges**: the reply's call log, found by the ``trace_id`` the reply stores
  (:data:`~advisors_app.memory.conversations.TRACE_ID`; ``CallLog.trace_id`` is unique), and the
  chain version and chain slug of that turn. A reply without a call log (stored before replies
  were tagged) is rated with those left empty.

A **reviewer**'s score (``source="reviewer"``, from the admin: :mod:`advisors_app.admin.scores`)
goes through the same :func:`parse_vote` and is stored by :func:`record_review` /
:func:`withdraw_review`: any assistant reply (not only the reviewer's own), one score per
(message, key, reviewer), upserted the same way. The admin asks for Django's
``advisors_app.add_score`` permission first; these functions do not check it.

A **correction** is a score under the key :data:`CORRECTION` (any value) whose ``comment`` is
the answer the reply should have given, from a reviewer or the reply's user: "add to dataset"
(:mod:`advisors_app.evaluation.curation`) makes it the item's expected output.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from advisors_app.core.messages import MessageType
from advisors_app.exceptions import Refusal
from advisors_app.memory.conversations import TRACE_ID
from advisors_app.models import CallLog, ChatMessage, Score
from advisors_app.models.scores import (
    MAX_CATEGORY_LENGTH,
    MAX_COMMENT_LENGTH,
    MAX_KEY_LENGTH,
    REASONS,
)
from advisors_app.validation import FieldErrors, text_problem

__all__ = [
    "CORRECTION",
    "FEEDBACK_FIELDS",
    "MAX_KEYS_PER_REPLY",
    "THUMBS",
    "FeedbackError",
    "Vote",
    "feedback_frame",
    "parse_vote",
    "record_review",
    "record_vote",
    "score_payload",
    "withdraw_review",
    "withdraw_vote",
]

#: The key of a user's 👍/👎 (a boolean score).
THUMBS = "thumbs"
#: The key of a correction: its comment is the answer the reply should have given.
CORRECTION = "correction"
#: How many keys one user may rate one reply under: votes are not throttled, so a user's rows
#: stay bounded by their (throttled) turns.
MAX_KEYS_PER_REPLY = 10
#: The fields of a vote (the websocket frame adds ``message_id``).
FEEDBACK_FIELDS = ("key", "value", "reason", "comment")
_THUMBS_WORDS = {"up": True, "down": False}
_KEY = re.compile(r"^[-a-zA-Z0-9_]+\Z")


class FeedbackError(Refusal):
    """Raised when a vote is refused: ``invalid`` (400; ``fields`` by field) or ``not_found``
    (404: no reply of the caller's has this id). Nothing was stored."""

    def __init__(
        self, code: str, message: str, *, errors: FieldErrors | None = None, http_status: int = 400
    ) -> None:
        super().__init__(message, code=code, http_status=http_status, fields=errors)

    @property
    def errors(self) -> FieldErrors:
        """``fields`` under its name before :class:`~advisors_app.exceptions.Refusal`: the
        functions raising it are documented for every transport (docs/evaluation.md)."""
        return self.fields


@dataclass(frozen=True, slots=True)
class Vote:
    """A validated vote: which reply, which key, and the value in the score's columns
    (``value_type`` ``None``: undo the vote)."""

    message_id: int
    key: str
    value_type: str | None
    numeric_value: float | None = None
    string_value: str = ""
    reason: str = ""
    comment: str = ""

    @property
    def withdraws(self) -> bool:
        """Whether this vote undoes the caller's vote (a ``null`` value)."""
        return self.value_type is None


def _invalid(errors: FieldErrors) -> FeedbackError:
    return FeedbackError("invalid", "The feedback is invalid.", errors=errors)


def _message_id(value: Any) -> tuple[int | None, str | None]:
    if isinstance(value, bool) or not isinstance(value, int):
        return None, "Send the id of a reply (the message_id of its done frame)."
    return value, None  # any other integer is a reply of the caller's or not found


def _key(value: Any) -> tuple[str, str | None]:
    if value is None:
        return THUMBS, None
    if not isinstance(value, str) or not _KEY.match(value) or len(value) > MAX_KEY_LENGTH:
        return "", (
            f"Use a key of at most {MAX_KEY_LENGTH} letters, digits, hyphens and underscores "
            f'(e.g. "{THUMBS}").'
        )
    return value, None


def _value(key: str, value: Any) -> tuple[str, float | None, str] | str:
    """``(value_type, numeric_value, string_value)`` of a non-null ``value``, or why not."""
    if key == THUMBS:
        if isinstance(value, bool):
            return Score.ValueType.BOOLEAN, float(value), ""
        if isinstance(value, str) and value in _THUMBS_WORDS:
            return Score.ValueType.BOOLEAN, float(_THUMBS_WORDS[value]), ""
        return 'A thumbs vote is true or false ("up" or "down").'
    if isinstance(value, bool):
        return Score.ValueType.BOOLEAN, float(value), ""
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            return "Send a finite number."
        return Score.ValueType.NUMERIC, number, ""
    if isinstance(value, str):
        if not value.strip():
            return "Send a non-blank label."
        if len(value) > MAX_CATEGORY_LENGTH:
            return f"Use a label of at most {MAX_CATEGORY_LENGTH} characters."
        problem = text_problem(value)
        return problem if problem else (Score.ValueType.CATEGORICAL, None, value)
    return "Send true or false, a number or a short label."


def _reason(value: Any) -> tuple[str, str | None]:
    if value is None or value == "":
        return "", None
    if not isinstance(value, str) or value not in REASONS:
        return "", f"Use one of {', '.join(REASONS)}, or leave it out."
    return value, None


def _comment(value: Any) -> tuple[str, str | None]:
    if value is None:
        return "", None
    if not isinstance(value, str):
        return "", "Send the comment as text."
    if len(value) > MAX_COMMENT_LENGTH:
        return "", f"Use at most {MAX_COMMENT_LENGTH} characters ({len(value)} sent)."
    return value, text_problem(value)


def parse_vote(
    data: Any,
    *,
    message_id: Any = None,
    envelope: Collection[str] = (),
    allow_withdraw: bool = False,
) -> Vote:
    """The vote in a decoded JSON body or frame. ``message_id`` given (the REST path), the
    body may not name one; otherwise ``data["message_id"]`` is required (the websocket frame).
    ``envelope`` names fields the transport reads itself (the frame's ``type``);
    ``allow_withdraw`` whether ``"value": null`` undoes the vote (the frame) rather than being
    refused (``PUT``: ``DELETE`` undoes). Raises :class:`FeedbackError` (``invalid``) with every
    field's error."""
    if not isinstance(data, Mapping):
        raise _invalid({"non_field_errors": ["Send a JSON object."]})
    from_body = message_id is None
    known = ("message_id", *FEEDBACK_FIELDS) if from_body else FEEDBACK_FIELDS
    errors: FieldErrors = {
        str(name): [f"Unknown field. Known fields: {', '.join(known)}."]
        for name in data
        if name not in known and name not in envelope
    }
    reply: int | None = None
    if from_body and "message_id" not in data:
        errors["message_id"] = ["This field is required."]
    else:
        reply, problem = _message_id(data["message_id"] if from_body else message_id)
        if problem:
            errors["message_id"] = [problem]
    key, problem = _key(data.get("key"))
    if problem:
        errors["key"] = [problem]
    parsed: tuple[str, float | None, str] | None = None
    if "value" not in data:
        errors["value"] = ["This field is required."]
    elif data["value"] is None:
        if not allow_withdraw:
            errors["value"] = ["This field may not be null: send DELETE to undo a vote."]
    elif key:
        checked = _value(key, data["value"])
        if isinstance(checked, str):
            errors["value"] = [checked]
        else:
            parsed = checked
    reason, problem = _reason(data.get("reason"))
    if problem:
        errors["reason"] = [problem]
    comment, problem = _comment(data.get("comment"))
    if problem:
        errors["comment"] = [problem]
    if errors:
        raise _invalid(errors)
    assert reply is not None
    if parsed is None:
        return Vote(reply, key, None)
    value_type, numeric, string = parsed
    return Vote(reply, key, value_type, numeric, string, reason, comment)


def _own_reply(user: Any, message_id: int) -> ChatMessage:
    """The reply ``message_id`` of a conversation ``user`` owns (blocking, one query)."""
    message = (
        ChatMessage.objects.filter(pk=message_id, conversation__owner_id=user.pk)
        .only("pk", "message_type", "metadata")
        .first()
    )
    if message is None:
        raise FeedbackError("not_found", "No reply of yours has this id.", http_status=404)
    if message.message_type != MessageType.ASSISTANT.value:
        raise _invalid({"message_id": ["Only the assistant's replies can be rated."]})
    return message


def _judged_turn(message: ChatMessage) -> tuple[int | None, int | None, str]:
    """``(call log pk, chain version pk, chain slug)`` of the turn that wrote ``message``."""
    trace_id = message.metadata.get(TRACE_ID) if isinstance(message.metadata, dict) else None
    if not isinstance(trace_id, str) or not trace_id:
        return None, None, ""
    row = (
        CallLog.objects.filter(trace_id=trace_id)
        .values_list("pk", "chain_version_id", "chain_slug")
        .first()
    )
    return row if row is not None else (None, None, "")


def record_vote(user: Any, vote: Vote) -> tuple[Score | None, bool]:
    """Store ``user``'s vote (blocking): ``(score, created)``, or ``(None, False)`` after
    undoing it (:attr:`Vote.withdraws`). Raises :class:`FeedbackError` for a message that is not
    one of ``user``'s replies, or for a new key past :data:`MAX_KEYS_PER_REPLY`. Concurrent
    votes of one user under one key end as one row (the unique constraint decides,
    ``update_or_create`` retries)."""
    message = _own_reply(user, vote.message_id)
    if vote.withdraws:
        _delete_vote(user, message.pk, vote.key)
        return None, False
    return _upsert(user, message, vote, Score.Source.USER)


def _upsert(user: Any, message: ChatMessage, vote: Vote, source: str) -> tuple[Score, bool]:
    votes = Score.objects.filter(message_id=message.pk, author_id=user.pk, source=source)
    if votes.exclude(key=vote.key).count() >= MAX_KEYS_PER_REPLY:
        raise _invalid(
            {"key": [f"You rated this reply under {MAX_KEYS_PER_REPLY} keys already: undo one."]}
        )
    call_log_id, chain_version_id, chain_slug = _judged_turn(message)
    with transaction.atomic():
        if source != Score.Source.USER:
            # No unique constraint covers reviewer scores (adding one needs a migration):
            # locking the reply makes concurrent reviews of it queue, so one row stays.
            list(ChatMessage.objects.select_for_update().filter(pk=message.pk).values("pk"))
        return Score.objects.update_or_create(
            message_id=message.pk,
            key=vote.key,
            author_id=user.pk,
            source=source,
            defaults={
                "value_type": vote.value_type,
                "numeric_value": vote.numeric_value,
                "string_value": vote.string_value,
                "reason": vote.reason,
                "comment": vote.comment,
                "call_log_id": call_log_id,
                "chain_version_id": chain_version_id,
                "chain_slug": chain_slug,
            },
        )


def _any_reply(message_id: int) -> ChatMessage:
    """The assistant reply ``message_id`` of any conversation (a reviewer's)."""
    message = (
        ChatMessage.objects.filter(pk=message_id).only("pk", "message_type", "metadata").first()
    )
    if message is None:
        raise FeedbackError("not_found", "No reply has this id.", http_status=404)
    if message.message_type != MessageType.ASSISTANT.value:
        raise _invalid({"message_id": ["Only the assistant's replies can be rated."]})
    return message


def record_review(user: Any, vote: Vote) -> tuple[Score | None, bool]:
    """Store ``user``'s reviewer score (``source="reviewer"``) on any assistant reply
    (blocking), as :func:`record_vote` stores a vote: ``(score, created)``, or ``(None,
    False)`` after undoing it. The caller checks ``advisors_app.add_score``. Raises
    :class:`FeedbackError` (``not_found``, or ``invalid`` for a message that is no reply or a
    new key past :data:`MAX_KEYS_PER_REPLY`)."""
    message = _any_reply(vote.message_id)
    if vote.withdraws:
        withdraw_review(user, message.pk, vote.key)
        return None, False
    return _upsert(user, message, vote, Score.Source.REVIEWER)


def withdraw_review(user: Any, message_id: int, key: Any = None) -> bool:
    """Delete ``user``'s reviewer score ``key`` (``None``: ``"thumbs"``) on the reply
    ``message_id`` (blocking); whether there was one."""
    checked, problem = _key(key)
    if problem:
        raise _invalid({"key": [problem]})
    deleted, _ = Score.objects.filter(
        message_id=message_id, key=checked, author_id=user.pk, source=Score.Source.REVIEWER
    ).delete()
    return deleted > 0


def withdraw_vote(user: Any, message_id: int, key: Any = None) -> bool:
    """Undo ``user``'s vote ``key`` (as sent: ``None`` is ``"thumbs"``) on their reply
    ``message_id`` (blocking); whether there was one. Raises :class:`FeedbackError`: ``invalid``
    for a malformed key (field ``key``), else as :func:`record_vote` does."""
    checked, problem = _key(key)
    if problem:
        raise _invalid({"key": [problem]})
    return _delete_vote(user, _own_reply(user, message_id).pk, checked)


def _delete_vote(user: Any, message_id: int, key: str) -> bool:
    deleted, _ = Score.objects.filter(
        message_id=message_id, key=key, author_id=user.pk, source=Score.Source.USER
    ).delete()
    return deleted > 0


def score_payload(score: Score) -> dict[str, Any]:
    """A score as the API and the websocket show it to its author."""
    return {
        "id": score.pk,
        "message_id": score.message_id,
        "key": score.key,
        "value": score.value,
        "value_type": score.value_type,
        "reason": score.reason,
        "comment": score.comment,
        "source": score.source,
        "created_at": score.created_at.isoformat(),
        "updated_at": score.updated_at.isoformat(),
    }


def feedback_frame(vote: Vote, score: Score | None) -> dict[str, Any]:
    """The websocket's ``feedback`` acknowledgement: the reply, the key and the stored score
    (``null`` once the vote is undone)."""
    return {
        "type": "feedback",
        "message_id": vote.message_id,
        "key": vote.key,
        "score": score_payload(score) if score is not None else None,
    }
