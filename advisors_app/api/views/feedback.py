"""Feedback on a reply: ``PUT`` / ``DELETE /api/messages/<message_id>/feedback/`` (issue 22).

Thin: :mod:`advisors_app.evaluation.feedback` validates and stores the vote, as it does for the chat
websocket's ``feedback`` frame. Only the owner of the reply's conversation may rate it (another
user's message answers 404, as an id never used); that is the only permission a vote needs, as
for the chat endpoints. Every vote, stored or refused, counts against
``ADVISORS["FEEDBACK_THROTTLE_RATE"]`` per user, as the websocket's ``feedback`` frames do
(:mod:`advisors_app.security.rates`): 429 ``throttled`` with ``Retry-After`` past it.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework.parsers import JSONParser
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.serializers.feedback import FeedbackRequestSerializer, ScoreSerializer
from advisors_app.evaluation.feedback import (
    THUMBS,
    parse_vote,
    record_vote,
    score_payload,
    withdraw_vote,
)
from advisors_app.security.rates import FeedbackRateThrottle, rate_refusal

__all__ = ["MessageFeedbackView"]

_ERRORS = {
    401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
    404: OpenApiResponse(ErrorSerializer, description="No reply of yours has this id."),
    429: OpenApiResponse(
        ErrorSerializer,
        description="Too many votes (code throttled): ADVISORS['FEEDBACK_THROTTLE_RATE']; "
        "see Retry-After.",
    ),
}


class MessageFeedbackView(ApiView):
    """``/api/messages/<message_id>/feedback/``: vote on one of your replies, or undo it."""

    parser_classes = [JSONParser]
    throttle_classes = [FeedbackRateThrottle]

    def throttled(self, request: Request, wait: float | None) -> Any:
        raise rate_refusal(FeedbackRateThrottle, wait)

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
        vote = parse_vote(request.data, message_id=message_id)
        score, created = record_vote(request.user, vote)
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
        withdraw_vote(request.user, message_id, request.query_params.get("key"))
        return Response(status=204)
