"""Scores: one table for every judgement of an answer (issue 22, "Feedback").

A :class:`Score` judges one assistant reply (``message``) under a ``key`` — ``"thumbs"`` for a
user's 👍/👎, later an evaluator's ``"exact_match"`` or a reviewer's ``"accuracy"`` — with a
value of one of three kinds (:class:`Score.ValueType`):

- **boolean**: ``numeric_value`` 1.0 (true, 👍, "up") or 0.0 (false, 👎, "down"), so the mean of
  a key's numeric values is its pass rate whatever the kind;
- **numeric**: ``numeric_value`` (any finite float; an evaluator documents its range);
- **categorical**: ``string_value`` (a short label, e.g. ``"partially_correct"``).

``reason`` is an optional short code from :data:`REASONS` (why a reply was rated down: the
chat page offers it after 👎); anything longer or free-form goes into ``comment``. Each score
keeps what it judges as the turn ran: the reply's call log (found by the ``trace_id`` the reply
stores, :data:`advisors_app.memory.conversations.TRACE_ID`), the chain version and the chain's slug
(kept when the chain is deleted).

A **user**'s vote is one row per (message, key, author): voting again updates it, undoing
deletes it (a partial unique constraint, so reviewers and evaluators may score the same reply
under the same key as well). Scores go with their message (a forgotten conversation forgets
its votes and their comments); a deleted call log, version or user leaves the score with a
null link.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models

__all__ = ["MAX_CATEGORY_LENGTH", "MAX_COMMENT_LENGTH", "MAX_KEY_LENGTH", "REASONS", "Score"]

MAX_KEY_LENGTH = 64
MAX_CATEGORY_LENGTH = 100
MAX_COMMENT_LENGTH = 2000

#: Why a reply was rated (down): the codes ``reason`` accepts, with their labels.
REASONS: dict[str, str] = {
    "wrong": "Wrong or made up",
    "incomplete": "Incomplete",
    "unhelpful": "Not helpful",
    "unsafe": "Unsafe or offensive",
    "other": "Other",
}


class Score(models.Model):
    """One judgement of one reply: ``key``, a boolean, numeric or categorical value, why, by
    whom (``source``, ``author``), and what it judges (message, call log, chain version)."""

    class ValueType(models.TextChoices):
        BOOLEAN = "boolean", "Boolean"
        NUMERIC = "numeric", "Numeric"
        CATEGORICAL = "categorical", "Categorical"

    class Source(models.TextChoices):
        #: The conversation's owner, on the chat page or through the feedback endpoint.
        USER = "user", "User"
        #: Someone reviewing answers in the admin.
        REVIEWER = "reviewer", "Reviewer"
        #: An evaluator of an evaluation run.
        EVALUATOR = "evaluator", "Evaluator"
        #: A program sending scores through the API.
        API = "api", "API"
        #: An online evaluation rule, on a sampled live turn (:mod:`advisors_app.online`).
        ONLINE = "online", "Online"

    key = models.SlugField(
        max_length=MAX_KEY_LENGTH, help_text='What is judged, e.g. "thumbs" (a user\'s 👍/👎).'
    )
    value_type = models.CharField(max_length=16, choices=ValueType.choices)
    #: Boolean (1.0 / 0.0) and numeric values.
    numeric_value = models.FloatField(null=True, blank=True)
    #: Categorical values.
    string_value = models.CharField(max_length=MAX_CATEGORY_LENGTH, blank=True)
    reason = models.CharField(
        max_length=32,
        blank=True,
        choices=list(REASONS.items()),
        help_text="Why (optional): the page offers it after a 👎.",
    )
    comment = models.TextField(blank=True, max_length=MAX_COMMENT_LENGTH)
    source = models.CharField(max_length=16, choices=Source.choices)
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="advisor_scores",
    )
    message = models.ForeignKey(
        "advisors_app.ChatMessage",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="scores",
    )
    call_log = models.ForeignKey(
        "advisors_app.CallLog",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="scores",
    )
    chain_version = models.ForeignKey(
        "advisors_app.ChainVersion",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="scores",
    )
    #: The chain that answered (kept when the chain is deleted); blank when unknown.
    chain_slug = models.SlugField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["message", "key", "author"],
                condition=models.Q(source="user"),
                name="advisors_score_one_user_vote",
            ),
            models.CheckConstraint(
                condition=(
                    models.Q(value_type="categorical", numeric_value__isnull=True)
                    & ~models.Q(string_value="")
                )
                | (
                    models.Q(value_type__in=["boolean", "numeric"], numeric_value__isnull=False)
                    & models.Q(string_value="")
                ),
                name="advisors_score_value_matches_type",
            ),
            models.CheckConstraint(
                condition=~models.Q(value_type="boolean") | models.Q(numeric_value__in=[0.0, 1.0]),
                name="advisors_score_boolean_is_0_or_1",
            ),
        ]
        indexes = [
            models.Index(fields=["chain_slug", "key", "-created_at"], name="advisors_score_chain"),
        ]

    def __str__(self) -> str:
        return f"{self.key}={self.display_value()} on message {self.message_id}"

    @property
    def value(self) -> Any:
        """The value as JSON has it: ``True``/``False``, a float, or a string."""
        if self.value_type == self.ValueType.BOOLEAN:
            return self.numeric_value == 1.0
        if self.value_type == self.ValueType.NUMERIC:
            return self.numeric_value
        return self.string_value

    def display_value(self) -> str:
        """The value for people: 👍/👎 for a thumbs vote, ``true``/``false``, the number or
        the label."""
        value = self.value
        if isinstance(value, bool):
            if self.key == "thumbs":
                return "👍" if value else "👎"
            return "true" if value else "false"
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)
