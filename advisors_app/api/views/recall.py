"""Recall for people: ``GET /api/conversations/<id>/search/?q=`` (issue 20, "Recall").

The same search as the model's ``conversation_search`` tool (:mod:`advisors_app.memory.recall`),
over the caller's own conversation only: another user's id answers 404, exactly like the
conversation's detail, and owning the conversation is the only permission a read needs.
"""

from __future__ import annotations

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.serializers.recall import (
    ConversationSearchHitSerializer,
    ConversationSearchQuerySerializer,
)
from advisors_app.memory.conversations import find_conversation
from advisors_app.memory.recall import (
    search_conversation,
)

__all__ = ["ConversationSearchView"]


class ConversationSearchView(ApiView):
    """``GET /api/conversations/<id>/search/?q=&limit=``: the best messages, best first."""

    @extend_schema(
        tags=["conversations"],
        summary="Search one of your conversations",
        description="PostgreSQL full-text search over the user and assistant messages of the "
        "conversation (tool responses and system messages are not searched), best first; "
        "ties newest first.",
        parameters=[ConversationSearchQuerySerializer],
        responses={
            200: ConversationSearchHitSerializer(many=True),
            400: OpenApiResponse(
                ErrorSerializer, description="A blank or too long q, or a limit out of range."
            ),
            401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
            404: OpenApiResponse(
                ErrorSerializer, description="No conversation of yours has this id."
            ),
        },
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = find_conversation(request.user, conversation_id)
        if conversation is None:
            raise Http404("No conversation of yours has this id.")
        parameters = ConversationSearchQuerySerializer(data=request.query_params)
        parameters.is_valid(raise_exception=True)
        hits = search_conversation(
            conversation.pk, parameters.validated_data["q"], parameters.validated_data["limit"]
        )
        body = ConversationSearchHitSerializer([hit.to_dict() for hit in hits], many=True).data
        return Response(body)
