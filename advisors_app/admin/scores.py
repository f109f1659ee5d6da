"""Admin of scores (issue 22, "Feedback"): every judgement of a reply, filterable by chain,
chain version, key, source and reason, each row linking to the reply's conversation and to
the call log of the turn it judges.

Read-only but deletable: votes are written by their authors (the chat page, the feedback
endpoint). Reviewer scores, datasets and "add to dataset" (a rated reply or a call log
becoming a dataset item, a correction its expected output) come with the evaluation part of
issue 22.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.text import Truncator

from advisors_app.bidi import isolated
from advisors_app.models import Score

__all__ = ["ScoreAdmin"]

#: Characters of the judged reply the list shows.
EXCERPT_CHARS = 80


@admin.register(Score)
class ScoreAdmin(admin.ModelAdmin):
    list_display = (
        "created_at",
        "key",
        "shown_value",
        "reason",
        "source",
        "message_excerpt",
        "author",
        "chain_slug",
        "chain_version",
        "call_log_link",
    )
    list_filter = ("chain_slug", "chain_version", "key", "source", "reason", "created_at")
    date_hierarchy = "created_at"
    search_fields = ("key", "comment", "chain_slug", "author__username", "call_log__trace_id")
    list_select_related = ("author", "message", "chain_version__chain", "call_log")
    fields = (
        "key",
        "shown_value",
        "value_type",
        "reason",
        "comment",
        "source",
        "author",
        "message_excerpt",
        "call_log_link",
        "chain_slug",
        "chain_version",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Value", ordering="numeric_value")
    def shown_value(self, obj: Score) -> str:
        return obj.display_value()

    @admin.display(description="Reply")
    def message_excerpt(self, obj: Score) -> str:
        """The judged reply's start, linking to its conversation's transcript."""
        message = obj.message
        if message is None:
            return "-"
        text = Truncator(" ".join(message.text.split())).chars(EXCERPT_CHARS) or "(no text)"
        url = reverse("admin:advisors_app_conversation_change", args=[message.conversation_id])
        return format_html('<a href="{}">{}</a>', url, isolated(text))

    @admin.display(description="Call log")
    def call_log_link(self, obj: Score) -> str:
        if obj.call_log_id is None:
            return "-"
        url = reverse("admin:advisors_app_calllog_change", args=[obj.call_log_id])
        return format_html('<a href="{}">{}</a>', url, obj.call_log.trace_id)
