"""Admin of call logs (read-only, filterable, with the per-advisor trace) and conversations."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, QuerySet
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.html import format_html

from advisors_app.admin.chains import chain_link
from advisors_app.admin.forms import pretty_json
from advisors_app.admin.traces import trace_rows
from advisors_app.conversations import public_conversation_id
from advisors_app.models import CallLog, ChatMessage, Conversation

__all__ = ["CallLogAdmin", "ConversationAdmin"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records are written by the runtime only; the admin views and deletes them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CallLog)
class CallLogAdmin(ReadOnlyAdmin):
    list_display = (
        "created",
        "chain_slug",
        "ran",
        "user",
        "mode",
        "status",
        "seconds",
        "ttft",
        "total_tokens",
        "error_type",
    )
    list_filter = ("status", "mode", "chain_slug", "created", "error_type")
    date_hierarchy = "created"
    search_fields = ("trace_id", "conversation_id", "error_message", "user__username")
    list_select_related = ("user", "chain_version")
    fields = (
        "created",
        "chain_link",
        "ran",
        "config_hash",
        "user",
        "conversation_link",
        "trace_id",
        "mode",
        "status",
        "latency",
        "time_to_first_token",
        "usage_json",
        "finish_reason",
        "error_type",
        "error_message",
        "provider_status",
        "trace_table",
    )
    readonly_fields = fields

    @admin.display(description="Latency", ordering="latency")
    def seconds(self, obj: CallLog) -> str:
        return f"{obj.latency:.3f} s"

    @admin.display(description="First token", ordering="time_to_first_token")
    def ttft(self, obj: CallLog) -> str:
        return "" if obj.time_to_first_token is None else f"{obj.time_to_first_token:.3f} s"

    @admin.display(description="Chain")
    def chain_link(self, obj: CallLog) -> str:
        return chain_link(obj.chain, obj.chain_slug)

    @admin.display(description="Ran")
    def ran(self, obj: CallLog) -> str:
        """The version and the label asked for; ``draft`` for the editable rows, ``-`` for a
        turn logged before chains had versions."""
        if obj.chain_version_id is None:
            return obj.label or "-"
        return f"{obj.chain_version} ({obj.label})" if obj.label else str(obj.chain_version)

    @admin.display(description="Conversation")
    def conversation_link(self, obj: CallLog) -> str:
        conversation = Conversation.objects.filter(conversation_id=obj.conversation_id).first()
        if conversation is None:
            return obj.conversation_id or "-"
        url = reverse("admin:advisors_app_conversation_change", args=[conversation.pk])
        return format_html('<a href="{}">{}</a>', url, obj.conversation_id)

    @admin.display(description="Usage")
    def usage_json(self, obj: CallLog) -> str:
        return format_html("<pre>{}</pre>", pretty_json(obj.usage))

    @admin.display(description="Trace")
    def trace_table(self, obj: CallLog) -> str:
        return render_to_string(
            "admin/advisors_app/trace_table.html",
            {"rows": trace_rows(obj.trace), "raw": pretty_json(obj.trace)},
        )


class ChatMessageInline(admin.TabularInline):
    """The transcript, in sequence order (read-only)."""

    model = ChatMessage
    fields = ("sequence", "message_type", "text", "flags", "created_at")
    readonly_fields = fields
    ordering = ("sequence",)
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Flags")
    def flags(self, obj: ChatMessage) -> str:
        metadata = obj.metadata or {}
        if metadata.get("interrupted"):
            return f"interrupted ({metadata.get('finish_reason', '?')})"
        return ""


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    inlines = [ChatMessageInline]
    list_display = ("public_id", "title", "owner", "message_total", "updated_at")
    list_filter = ("updated_at",)
    search_fields = ("conversation_id", "title", "owner__username")
    list_select_related = ("owner",)
    fields = (
        "public_id",
        "conversation_id",
        "owner",
        "title",
        "chain_version",
        "created_at",
        "updated_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[Conversation]:
        return super().get_queryset(request).annotate(message_total=Count("messages"))

    @admin.display(description="Conversation", ordering="conversation_id")
    def public_id(self, obj: Conversation) -> str:
        return public_conversation_id(obj.conversation_id)

    @admin.display(description="Messages", ordering="message_total")
    def message_total(self, obj: Conversation) -> int:
        return obj.message_total  # type: ignore[attr-defined, no-any-return]
