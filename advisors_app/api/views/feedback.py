"""Feedback on a reply: ``PUT`` / ``DELETE /api/messages/<message_id>/feedback/`` (issue 22).

Thin: :mod:`advisors_app.evaluation.feedback` validates and stores the vote, as it does for the chat
websocket's ``feedback`` frame. Only the owner of the reply's conversation may rate it (another
user's message answers 404, as an id never used); that is the only permission a vote needs, as
for the chat endpoints.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer, error_body
from advisors_app.evaluation.feedback import (
    THUMBS,
    FeedbackError,
    parse_vote,
    record_vote,
    score_payload,
    withdraw_vote,
)
from advisors_app.models import Score
from advisors_app.models.scores import MAX_COMMENT_LENGTH, MAX_KEY_LENGTH, REASONS

__all__ = ["FeedbackRequestSerializer", "MessageFeedbackView", "ScoreSerializer"]

_ERRORS = {
    401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
    404: OpenApiResponse(ErrorSerializer, description="No reply of yours has this id."),
}


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


def _refused(refused: FeedbackError) -> Response:
    body = error_body(refused.code, refused.message, refused.errors)
    return Response(body, status=refused.http_status)


class MessageFeedbackView(ApiView):
    """``/api/messages/<message_id>/feedback/``: vote on one of your replies, or undo it."""

    parser_classes = [JSONParser]

    @extend_schema(
        tags=["feedback"],
        summary="Rate one of your replies (👍/👎, a number or a label)",
        description="Upserts your vote under `key`: voting again replaces it (a reason or "
        "comment left out is cleared). Only replies (assistant messages) of your own "
        "conversations; `message_id` is the id a turn's answer and `done` frame carry.",
        request=FeedbackRequestSerializer,
        responses={
            200: OpenApiResponse(ScoreSerializer, description="Your vote, changed."),
            201: OpenApiResponse(ScoreSerializer, description="Your vote, new."),
            400: OpenApiResponse(
                ErrorSerializer,
                description="Invalid fields, or the message is not a reply (code invalid).",
            ),
            415: OpenApiResponse(ErrorSerializer, description="The body is not JSON."),
            **_ERRORS,
        },
    )
    def put(self, request: Request, message_id: int) -> Response:
        try:
            vote = parse_vote(request.data, message_id=message_id)
            score, created = record_vote(request.user, vote)
        except FeedbackError as refused:
            return _refused(refused)
        assert score is not None
        return Response(score_payload(score), status=201 if created else 200)

    @extend_schema(
        tags=["feedback"],
        summary="Undo your vote on a reply",
        description="Deletes your vote under `key`; 204 also when there was none.",
        parameters=[
            OpenApiParameter(
                "key", OpenApiTypes.STR, description=f'The vote\'s key (default "{THUMBS}").'
            )
        ],
        responses={
            204: None,
            400: OpenApiResponse(
                ErrorSerializer, description="A malformed key, or the message is not a reply."
            ),
            **_ERRORS,
        },
    )
    def delete(self, request: Request, message_id: int) -> Response:
        try:
            withdraw_vote(request.user, message_id, request.query_params.get("key"))
        except FeedbackError as refused:
            return _refused(refused)
        return Response(status=204)
