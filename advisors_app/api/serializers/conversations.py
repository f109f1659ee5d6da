"""A caller's conversations: the list, a transcript with the caller's votes, the session
log's boundaries (:mod:`advisors_app.api.views.conversations`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from advisors_app.api.serializers.chat import UsageSerializer
from advisors_app.api.serializers.fields import TextField
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.memory.pending import message_state, public_metadata
from advisors_app.models import ChatMessage, Conversation, ConversationBoundary

__all__ = [
    "OWN_VOTES",
    "ConversationBoundarySerializer",
    "ConversationDetailSerializer",
    "ConversationSerializer",
    "MessageSerializer",
    "OwnVoteSerializer",
]


class ConversationSerializer(serializers.ModelSerializer):
    id = serializers.SerializerMethodField(help_text="The conversation id clients use.")
    title = TextField(max_length=200, allow_blank=True)

    class Meta:
        model = Conversation
        fields = ["id", "title", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]

    def get_id(self, conversation: Conversation) -> str:
        return public_conversation_id(conversation.conversation_id)

    def to_internal_value(self, data: Any) -> Any:
        """A ``PATCH`` naming a field it cannot change is refused (400, per field) rather than
        half applied: a read-only field, or one the conversation does not have."""
        if isinstance(data, Mapping):
            writable = {name for name, field in self.fields.items() if not field.read_only}
            errors = {
                name: ["This field is read-only." if name in self.fields else "Unknown field."]
                for name in sorted(set(data) - writable, key=str)
            }
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)


class OwnVoteSerializer(serializers.Serializer):
    """The caller's vote on a reply (``PUT /api/messages/<id>/feedback/``)."""

    value = serializers.JSONField(help_text="true/false (thumbs), a number or a label.")
    reason = serializers.CharField(allow_blank=True)
    comment = serializers.CharField(allow_blank=True)

    class Meta:
        ref_name = "OwnVote"


#: The attribute holding a message's votes by its reader (prefetched by the conversation view).
OWN_VOTES = "own_votes"


class MessageSerializer(serializers.ModelSerializer):
    """One stored message; ``id`` is what a turn's answer calls ``message_id``."""

    # ``feedback`` reads the caller's votes from the OWN_VOTES attribute the view prefetches.

    type = serializers.CharField(source="message_type")
    metadata = serializers.SerializerMethodField()
    state = serializers.SerializerMethodField(
        help_text='null for a message of a turn that ended; "pending": a user\'s message whose '
        'turn is still running; "interrupted": a reply cut short (metadata says why) or a '
        "user's message whose turn never finished (the server stopped mid-turn)."
    )
    feedback = serializers.SerializerMethodField(
        help_text='Your votes on this reply by key, e.g. {"thumbs": {"value": false, '
        '"reason": "wrong", "comment": ""}}; {} when you have not rated it.'
    )

    class Meta:
        model = ChatMessage
        fields = ["id", "sequence", "type", "text", "metadata", "tool_calls", "tool_responses"]
        fields += ["created_at", "state", "feedback"]
        ref_name = "ConversationMessage"

    @extend_schema_field(serializers.DictField())
    def get_metadata(self, message: ChatMessage) -> Any:
        return public_metadata(message.metadata)

    @extend_schema_field(
        serializers.ChoiceField(choices=["pending", "interrupted"], allow_null=True)
    )
    def get_state(self, message: ChatMessage) -> str | None:
        return message_state(message.metadata, message.created_at)

    @extend_schema_field(serializers.DictField(child=OwnVoteSerializer()))
    def get_feedback(self, message: ChatMessage) -> dict[str, dict[str, Any]]:
        return {
            score.key: {"value": score.value, "reason": score.reason, "comment": score.comment}
            for score in getattr(message, OWN_VOTES)
        }


@extend_schema_field(UsageSerializer(allow_null=True))
class _StoredUsageField(serializers.JSONField):
    """A stored ``Usage.to_dict()`` as it was written (``null``: no model was called)."""


class ConversationBoundarySerializer(serializers.ModelSerializer):
    """One boundary event of a conversation's session log (``ConversationBoundary``)."""

    kind = serializers.CharField(help_text='What the event is: "compaction".')
    covers_up_to = serializers.IntegerField(
        help_text="The sequence of the last message that left the model's view (the messages "
        "themselves stay in messages, unchanged)."
    )
    summary = serializers.CharField(
        allow_blank=True,
        help_text="What replaces the covered messages in the prompt (blank for a window).",
    )
    model = serializers.CharField(
        allow_blank=True, help_text="The chat model that wrote the summary (blank for a window)."
    )
    usage = _StoredUsageField(help_text="The summary call's token usage (null: no model call).")

    class Meta:
        model = ConversationBoundary
        fields = ["kind", "covers_up_to", "summary", "model", "usage", "created_at"]
        read_only_fields = fields
        ref_name = "ConversationBoundary"


class ConversationDetailSerializer(ConversationSerializer):
    messages = MessageSerializer(many=True, read_only=True)
    boundaries = ConversationBoundarySerializer(
        many=True,
        read_only=True,
        help_text="Compactions of the session log, oldest first (empty without session memory).",
    )

    class Meta(ConversationSerializer.Meta):
        fields = [*ConversationSerializer.Meta.fields, "messages", "boundaries"]
