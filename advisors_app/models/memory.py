"""Chat memory in the database: conversations and their messages.

A conversation's messages are ordered by a per-conversation ``sequence`` number, never by
timestamps (two messages of one turn can share a timestamp; clocks of several workers differ).
Sequence numbers are handed out under a row lock on the conversation
(``Conversation.last_sequence``), so concurrent turns never interleave. Tool calls and tool
responses are stored, not dropped (Spring AI's JDBC repository drops them, defect 5.3.21), and
conversation ids may be up to 255 characters (Spring AI's schema stops at 36).
"""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from advisors_app.core.memory import MAX_CONVERSATION_ID_LENGTH
from advisors_app.core.messages import MessageType
from advisors_app.security.bidi import without_bidi_controls

__all__ = ["ChatMessage", "Conversation"]


class Conversation(models.Model):
    """One conversation: the id callers pass as ``CONVERSATION_ID``, its owner, its title."""

    conversation_id = models.CharField(max_length=MAX_CONVERSATION_ID_LENGTH, unique=True)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="advisor_conversations",
        help_text="The user who may see and continue this conversation.",
    )
    title = models.CharField(max_length=200, blank=True)
    #: The chain version the conversation started on; later turns keep it unless the chain's
    #: ``version_policy`` follows its label (memory written under one version is never
    #: replayed into another).
    chain_version = models.ForeignKey(
        "advisors_app.ChainVersion",
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="conversations",
    )
    listed = models.BooleanField(
        default=True,
        help_text="Listed in its owner's chat sidebar and GET /api/conversations/. Off for "
        "the conversations of the admin playground, its comparisons and evaluation runs: "
        "a staff member's tests are not their chats (still opened by id).",
    )
    #: The highest sequence number handed out so far (kept even when messages are deleted).
    last_sequence = models.BigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]

    def __str__(self) -> str:
        # Shown as the admin's title, breadcrumb and heading: no override character turns them.
        return without_bidi_controls(self.title or self.conversation_id)


class ChatMessage(models.Model):
    """One message of a conversation, at position ``sequence`` (unique in the conversation)."""

    # No index of its own: the unique (conversation, sequence) index serves every lookup.
    conversation = models.ForeignKey(
        Conversation, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    sequence = models.BigIntegerField()
    message_type = models.CharField(
        max_length=16, choices=[(t.value, t.name.capitalize()) for t in MessageType]
    )
    text = models.TextField(blank=True)
    metadata = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    #: ``[{"id", "name", "arguments", "type"}]`` of an assistant message.
    tool_calls = models.JSONField(default=list, blank=True)
    #: ``[{"id", "name", "response_data"}]`` of a tool-response message.
    tool_responses = models.JSONField(default=list, blank=True)
    #: ``[{"mime_type", "name", "data" | "data_base64"}]`` of a user message.
    media = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation", "sequence"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "sequence"], name="advisors_chatmessage_sequence_unique"
            ),
        ]
        indexes = [
            # The stored system messages of a conversation, without scanning its history.
            models.Index(
                fields=["conversation", "sequence"],
                condition=models.Q(message_type="system"),
                name="advisors_chatmessage_system",
            ),
            # The messages stored before their turn ran and not replaced by it (the
            # ``turn_pending`` key of advisors_app.stores.memory): what the recovery of turns
            # whose process died looks for, without scanning every message.
            models.Index(
                fields=["created_at"],
                condition=models.Q(metadata__has_key="turn_pending"),
                name="advisors_chatmessage_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}#{self.sequence} {self.message_type}"
