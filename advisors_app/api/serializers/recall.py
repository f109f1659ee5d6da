"""The query and the hits of a conversation search (:mod:`advisors_app.api.views.recall`)."""

from __future__ import annotations

from rest_framework import serializers

from advisors_app.memory.recall import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY_CHARS, SNIPPET_CHARS

__all__ = ["ConversationSearchHitSerializer", "ConversationSearchQuerySerializer"]


class ConversationSearchQuerySerializer(serializers.Serializer):
    """The query parameters of a conversation search."""

    q = serializers.CharField(
        max_length=MAX_QUERY_CHARS,
        help_text='Words to find (all of them; "quoted phrase", -excluded and or work as in a '
        "search engine). When no message has them all, messages with any of them; when none "
        "has any, messages holding q as a substring.",
    )
    limit = serializers.IntegerField(
        required=False,
        default=DEFAULT_LIMIT,
        min_value=1,
        max_value=MAX_LIMIT,
        help_text="How many messages to return, best first.",
    )

    class Meta:
        ref_name = "ConversationSearchQuery"


class ConversationSearchHitSerializer(serializers.Serializer):
    """One message found."""

    message_id = serializers.IntegerField(help_text="The message's id (as in the transcript).")
    sequence = serializers.IntegerField(help_text="Its position in the conversation.")
    role = serializers.ChoiceField(["user", "assistant"])
    snippet = serializers.CharField(
        help_text=f"Text around the matches (at most {SNIPPET_CHARS} characters, on one line), "
        "each match between ** (Markdown bold; the text is not HTML-escaped)."
    )
    rank = serializers.FloatField(
        help_text="Full-text rank (ts_rank normalised by length; higher is better); 0 for a "
        "substring match."
    )
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "ConversationSearchHit"
