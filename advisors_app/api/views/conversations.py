"""Conversations: the caller's own only (another user's id answers 404, as one never used)."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view
from rest_framework import generics
from rest_framework.request import Request
from rest_framework.response import Response

from advisors_app.api.base import ApiView
from advisors_app.api.errors import ErrorSerializer
from advisors_app.api.pagination import ApiPagination
from advisors_app.api.serializers.conversations import (
    OWN_VOTES,
    ConversationDetailSerializer,
    ConversationSerializer,
)
from advisors_app.core.advisors.vector_store_chat_memory import CONVERSATION_ID_METADATA
from advisors_app.memory.conversations import find_conversation, listed_conversations
from advisors_app.models import ChatMessage, Conversation, ConversationBoundary, Document, Score
from advisors_app.stores.memory import DjangoChatMemoryRepository

__all__ = ["ConversationDetailView", "ConversationListView", "forget_conversation"]

_repository = DjangoChatMemoryRepository()
_NOT_FOUND = {
    401: OpenApiResponse(ErrorSerializer, description="Not authenticated."),
    404: OpenApiResponse(ErrorSerializer, description="No conversation of yours has this id."),
}


def forget_conversation(user: Any, conversation: Conversation) -> None:
    """Delete ``conversation`` with its messages and its long-term memory documents."""
    key = conversation.conversation_id
    with transaction.atomic():
        # Long-term memory (VectorStoreChatMemoryAdvisor) of this conversation, the user's own.
        Document.objects.filter(
            owner_id=user.pk, metadata__contains={CONVERSATION_ID_METADATA: key}
        ).delete()
        _repository.delete_by_conversation_id(key)


@extend_schema_view(
    get=extend_schema(
        tags=["conversations"],
        summary="Your conversations, newest first",
        responses={200: ConversationSerializer(many=True), **_NOT_FOUND},
    )
)
class ConversationListView(ApiView, generics.ListAPIView):
    """``GET /api/conversations/``: the caller's conversations (paginated), those of the admin
    playground and evaluation runs left out (``Conversation.listed``)."""

    serializer_class = ConversationSerializer
    pagination_class = ApiPagination

    def get_queryset(self) -> QuerySet[Conversation]:
        return listed_conversations(self.request.user).order_by("-updated_at", "-pk")


@extend_schema_view(
    get=extend_schema(
        tags=["conversations"],
        summary="One of your conversations with its messages and boundaries",
        responses={200: ConversationDetailSerializer, **_NOT_FOUND},
    ),
    patch=extend_schema(
        tags=["conversations"],
        summary="Rename a conversation",
        request=ConversationSerializer,
        responses={
            200: ConversationSerializer,
            400: OpenApiResponse(ErrorSerializer, description="Invalid title."),
            **_NOT_FOUND,
        },
    ),
    delete=extend_schema(
        tags=["conversations"],
        summary="Delete a conversation and its memory",
        responses={204: None, **_NOT_FOUND},
    ),
)
class ConversationDetailView(ApiView):
    """``/api/conversations/<id>/``: show, rename (``PATCH {"title"}``) or delete (forget)."""

    serializer_class = ConversationDetailSerializer

    def _conversation(self, request: Request, conversation_id: str) -> Conversation:
        conversation = find_conversation(request.user, conversation_id)
        if conversation is None:
            raise Http404("No conversation of yours has this id.")
        return conversation

    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = self._conversation(request, conversation_id)
        votes = Score.objects.filter(source=Score.Source.USER, author_id=request.user.pk)
        messages = ChatMessage.objects.order_by("sequence").prefetch_related(
            Prefetch("scores", queryset=votes.order_by("key"), to_attr=OWN_VOTES)
        )
        boundaries = ConversationBoundary.objects.order_by("covers_up_to", "pk")
        conversation = (
            Conversation.objects.prefetch_related(
                Prefetch("messages", queryset=messages),
                Prefetch("boundaries", queryset=boundaries),
            )
            .filter(pk=conversation.pk)
            .get()
        )
        return Response(ConversationDetailSerializer(conversation).data)

    def patch(self, request: Request, conversation_id: str) -> Response:
        conversation = self._conversation(request, conversation_id)
        serializer = ConversationSerializer(conversation, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        serializer.save()
        return Response(serializer.data)

    def delete(self, request: Request, conversation_id: str) -> Response:
        forget_conversation(request.user, self._conversation(request, conversation_id))
        return Response(status=204)
