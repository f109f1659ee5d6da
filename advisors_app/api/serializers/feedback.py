"""A vote on a reply and the stored vote (:mod:`advisors_app.api.views.feedback`; documentation:
:mod:`advisors_app.evaluation.feedback` validates)."""

from __future__ import annotations

from rest_framework import serializers

from advisors_app.evaluation.feedback import THUMBS
from advisors_app.models import Score
from advisors_app.models.scores import MAX_COMMENT_LENGTH, MAX_KEY_LENGTH, REASONS

__all__ = ["FeedbackRequestSerializer", "ScoreSerializer"]


class FeedbackRequestSerializer(serializers.Serializer):
    """A vote (documentation; :func:`advisors_app.evaluation.feedback.parse_vote` validates)."""

    key = serializers.CharField(
        required=False,
        max_length=MAX_KEY_LENGTH,
        help_text=f'What is judged (letters, digits, - and _); default "{THUMBS}".',
    )
    value = serializers.JSONField(
        help_text='For "thumbs": true or false ("up" or "down"). Other keys: a boolean, a '
        "finite number or a label of at most 100 characters."
    )
    reason = serializers.ChoiceField(
        choices=list(REASONS.items()),
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="Why (optional): the chat page offers it after a 👎.",
    )
    comment = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        max_length=MAX_COMMENT_LENGTH,
        help_text="Free text (optional).",
    )

    class Meta:
        ref_name = "FeedbackRequest"


class ScoreSerializer(serializers.Serializer):
    """A stored vote (documentation; :func:`advisors_app.evaluation.feedback.score_payload`)."""

    id = serializers.IntegerField()
    message_id = serializers.IntegerField(help_text="The reply it judges.")
    key = serializers.CharField()
    value = serializers.JSONField(help_text="true/false, a number or a label.")
    value_type = serializers.ChoiceField(choices=Score.ValueType.choices)
    reason = serializers.CharField(allow_blank=True)
    comment = serializers.CharField(allow_blank=True)
    source = serializers.ChoiceField(choices=Score.Source.choices, help_text='Always "user".')
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()

    class Meta:
        ref_name = "Score"
