"""Session memory in the database: the boundary events of a conversation's log.

The log is the conversation's :class:`~advisors_app.models.ChatMessage` rows, append-only; a
compaction never rewrites or deletes one. It appends a :class:`ConversationBoundary` instead:
the messages up to ``covers_up_to`` (a ``ChatMessage.sequence``) left the prompt's view, and
``summary`` replaces them there (Spring AI 2.1 ``COMPACTION`` events). The newest boundary (the
highest ``covers_up_to``) defines the view.
"""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

from advisors_app.core.memory import COMPACTION

__all__ = ["ConversationBoundary"]


class ConversationBoundary(models.Model):
    """One boundary event of a conversation: a compaction up to ``covers_up_to``."""

    conversation = models.ForeignKey(
        "advisors_app.Conversation",
        on_delete=models.CASCADE,
        related_name="boundaries",
        db_index=False,  # the (conversation, covers_up_to) index serves every lookup
    )
    kind = models.CharField(max_length=32, default=COMPACTION)
    #: The sequence number of the last message that left the view.
    covers_up_to = models.BigIntegerField()
    summary = models.TextField(blank=True)
    #: The chat model that wrote the summary ("" for a plain window).
    model = models.CharField(max_length=200, blank=True)
    #: The summary call's usage (``Usage.to_dict()``), if a model was called.
    usage = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["conversation", "covers_up_to"]
        indexes = [
            models.Index(fields=["conversation", "-covers_up_to"], name="advisors_boundary_newest"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id} {self.kind} up to #{self.covers_up_to}"
