"""Admin of call logs (read-only, filterable, with the per-advisor trace, the cost of each model
call and the tool-call approvals a turn paused for or ran; the spend report is one of its
pages) and conversations.

Reviewing (issue 22): a call log's page and each reply of a conversation's transcript show
the reply's scores and, for holders of ``add_score``, a link to rate it
(:class:`~advisors_app.admin.scores.ScoreAdmin`'s rate page); "Add to dataset" turns selected
call logs' turns into dataset items (:class:`~advisors_app.admin.evaluation.AddToDatasetMixin`).

A call log's error message and trace are shown redacted (:mod:`advisors_app.security.redaction`), so
rows stored before secrets were redacted on the way in do not show a key either.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.loader import render_to_string
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from advisors_app.admin.approvals import approval_flags, approval_inlines
from advisors_app.admin.chains import chain_link
from advisors_app.admin.costs import cost_rounds_table, cost_text
from advisors_app.admin.evaluation import AddToDatasetMixin
from advisors_app.admin.forms import pretty_json
from advisors_app.admin.scores import REVIEW_PERMISSION, review_cell
from advisors_app.admin.sessions import TranscriptFormSet, compact_conversation_now
from advisors_app.admin.spend_report import spend_report
from advisors_app.admin.traces import trace_rows, usage_line
from advisors_app.core.messages import MessageType
from advisors_app.evaluation.curation import replies_of_call_logs, reply_of_call_log
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.memory.pending import (
    INTERRUPTED_STATE,
    PENDING_STATE,
    SERVER_STOPPED,
    message_state,
)
from advisors_app.models import CallLog, ChatMessage, Conversation
from advisors_app.security.bidi import isolated
from advisors_app.security.redaction import redact, redact_data

__all__ = ["CallLogAdmin", "ConversationAdmin", "duration_text", "reply_details"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records are written by the runtime only; the admin views and deletes them."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(CallLog)
class CallLogAdmin(AddToDatasetMixin, ReadOnlyAdmin):
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
        "cost",
        "error_type",
    )
    list_filter = (
        "status",
        "mode",
        "finish_category",
        "chain_slug",
        "price_source",
        "created",
        "error_type",
    )
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
        "seconds",
        "ttft",
        "usage_json",
        "cost_detail",
        "finish_reason",
        "finish_category",
        "guard_table",
        "error_type",
        "error_text",
        "provider_status",
        "trace_table",
    )
    readonly_fields = (*fields, "review")
    actions = ("add_to_dataset",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """The reply's scores and the rate link come after the conversation, for reviewers."""
        fields = list(super().get_fields(request, obj))
        if obj is not None and request.user.has_perm(REVIEW_PERMISSION):
            fields.insert(fields.index("conversation_link") + 1, "review")
        return fields

    def dataset_replies(self, queryset: QuerySet[CallLog]) -> tuple[list[ChatMessage], list[str]]:
        return replies_of_call_logs(queryset.order_by("created", "pk"))

    @admin.display(description="Reply's scores")
    def review(self, obj: CallLog) -> str:
        reply = reply_of_call_log(obj)
        if reply is None:
            return "- (no stored reply)"
        return review_cell(reply, reverse("admin:advisors_app_calllog_change", args=[obj.pk]))

    def get_inlines(self, request: HttpRequest, obj: Any) -> list[Any]:
        return approval_inlines(obj)

    def get_urls(self) -> list[URLPattern]:
        report = path(
            "report/",
            self.admin_site.admin_view(self.spend_report_view),
            name="advisors_app_calllog_report",
        )
        return [report, *super().get_urls()]

    def spend_report_view(self, request: HttpRequest) -> HttpResponse:
        """Spend by day, user, chain and model, and the budgets (:mod:`.costs`)."""
        return spend_report(self, request)

    @admin.display(description="Cost", ordering="total_cost")
    def cost(self, obj: CallLog) -> str:
        """The total with its currency; an unknown price is flagged, never shown as 0."""
        return cost_text(obj)

    @admin.display(description="Cost")
    def cost_detail(self, obj: CallLog) -> str:
        return cost_rounds_table(obj)

    @admin.display(description="Latency", ordering="latency")
    def seconds(self, obj: CallLog) -> str:
        return duration_text(obj.latency)

    @admin.display(description="First token", ordering="time_to_first_token")
    def ttft(self, obj: CallLog) -> str:
        return duration_text(obj.time_to_first_token)

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

    @admin.display(description="Guard verdicts")
    def guard_table(self, obj: CallLog) -> str:
        """One line per verdict: rail, check, action, and what it found."""
        lines = [
            format_html(
                "<li><code>{}</code> {} → <strong>{}</strong>{} <small>{}</small></li>",
                rail,
                check,
                action,
                " (failed)" if failed else "",
                detail,
            )
            for rail, check, action, failed, detail in guard_lines(redact_data(obj.guard_verdicts))
        ]
        if not lines:
            return "-"
        return format_html("<ul>{}</ul>", format_html("".join(["{}"] * len(lines)), *lines))

    @admin.display(description="Error message")
    def error_text(self, obj: CallLog) -> str:
        return redact(obj.error_message)

    @admin.display(description="Trace")
    def trace_table(self, obj: CallLog) -> str:
        trace = redact_data(obj.trace)
        return render_to_string(
            "admin/advisors_app/trace_table.html",
            {"rows": trace_rows(trace), "raw": pretty_json(trace)},
        )


def duration_text(seconds: float | None) -> str:
    """A duration for people: ``"850 ms"`` under a second, ``"17.58 s"`` under a minute, then
    ``"2 min 05 s"``; ``""`` for none (a call log's latency was shown as 17.58356509400005)."""
    if seconds is None:
        return ""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _seconds(milliseconds: Any) -> str:
    return f"{milliseconds / 1000:.3f} s"


def guard_lines(verdicts: Any) -> list[tuple[str, str, str, bool, str]]:
    """``(rail, check, action, failed, detail)`` per guard verdict (``detail`` as compact
    JSON); entries that are not verdicts are skipped."""
    lines = []
    for item in verdicts if isinstance(verdicts, list) else []:
        if not isinstance(item, dict):
            continue
        detail = item.get("detail") or {}
        lines.append(
            (
                str(item.get("rail") or "?"),
                str(item.get("check") or "?"),
                str(item.get("action") or "?"),
                bool(item.get("failed")),
                json.dumps(detail, ensure_ascii=False, sort_keys=True) if detail else "",
            )
        )
    return lines


def reply_details(metadata: Any) -> dict[str, Any]:
    """A stored reply's turn, compactly: what the conversation's admin transcript shows.

    ``metadata`` is an assistant ``ChatMessage.metadata`` (``TurnOutcome.reply_metadata``:
    ``version``, ``sources``, ``tools``, ``usage``, ``finish_reason``, ``timings`` in
    milliseconds, ``guard``). Returns ``{"summary", "sources", "tools", "guard"}``: ``summary``
    the version (``draft`` for ``None``), the timings in seconds as the call log shows them and
    the token usage, joined by `` · ``; ``sources`` ``(title, score)`` pairs (``score``
    formatted, or ``""``); ``tools`` ``(name, status)`` pairs; ``guard`` ``(rail, check,
    action)`` triples of the turn's guard verdicts (why a reply was cut, a document dropped).
    Keys a reply stored before they existed lack are left out; nothing known gives empty
    values.
    """
    metadata = metadata if isinstance(metadata, dict) else {}
    summary = []
    if "version" in metadata:
        version = metadata["version"]
        summary.append(f"v{version}" if version is not None else "draft")
    timings = metadata.get("timings") if isinstance(metadata.get("timings"), dict) else {}
    if _is_number(timings.get("time_to_first_token_ms")):
        summary.append(f"first token {_seconds(timings['time_to_first_token_ms'])}")
    if _is_number(timings.get("latency_ms")):
        summary.append(f"total {_seconds(timings['latency_ms'])}")
    usage = usage_line(metadata.get("usage"))
    if usage:
        summary.append(usage)
    sources = [
        (
            str(item.get("title") or item.get("source") or item.get("document_id") or "?"),
            f"{item['score']:.2f}" if _is_number(item.get("score")) else "",
        )
        for item in metadata.get("sources") or []
        if isinstance(item, dict)
    ]
    tools = []
    for item in metadata.get("tools") or []:
        if not isinstance(item, dict):
            continue
        status = "ok" if item.get("ok") else f"failed: {item.get('error') or '?'}"
        if _is_number(item.get("duration_ms")):
            status += f" ({item['duration_ms']:.0f} ms)"
        tools.append((str(item.get("name") or "?"), status))
    guard = [
        (rail, check, action) for rail, check, action, _, _ in guard_lines(metadata.get("guard"))
    ]
    return {"summary": " · ".join(summary), "sources": sources, "tools": tools, "guard": guard}


class ChatMessageInline(admin.TabularInline):
    """The transcript, in sequence order (read-only); an assistant reply shows its turn, a
    tool-call message waiting for approval or resumed by decisions shows them, and each
    compaction boundary shows after the last message it covers (:mod:`.sessions`)."""

    model = ChatMessage
    formset = TranscriptFormSet
    template = "admin/advisors_app/conversation/transcript.html"
    fields = ("sequence", "message_type", "text", "flags", "turn", "created_at")
    readonly_fields = (*fields, "review")
    ordering = ("sequence",)
    extra = 0
    can_delete = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChatMessage]:
        return (
            super()
            .get_queryset(request)
            .prefetch_related("tool_approvals__decided_by", "scores__author")
        )

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        """A "Scores" column (each reply's scores and a rate link) for reviewers."""
        fields = list(super().get_fields(request, obj))
        return [*fields, "review"] if request.user.has_perm(REVIEW_PERMISSION) else fields

    @admin.display(description="Scores")
    def review(self, obj: ChatMessage) -> str:
        if obj.message_type != MessageType.ASSISTANT.value:
            return ""
        back = reverse("admin:advisors_app_conversation_change", args=[obj.conversation_id])
        return review_cell(obj, back)

    @admin.display(description="Flags")
    def flags(self, obj: ChatMessage) -> str:
        metadata = obj.metadata or {}
        state = message_state(metadata, obj.created_at)
        if state == INTERRUPTED_STATE:
            # A user's message never answered (its process died) says so too.
            return f"interrupted ({metadata.get('finish_reason', SERVER_STOPPED)})"
        if state == PENDING_STATE:
            return "pending (its turn is running)"
        if obj.tool_calls:
            return approval_flags(obj)
        return ""

    @admin.display(description="Turn")
    def turn(self, obj: ChatMessage) -> str:
        """Version, timings, usage, sources (title and score) and tool calls of a reply."""
        if obj.message_type != MessageType.ASSISTANT.value:
            return ""
        details = reply_details(obj.metadata)
        if not any(details.values()):
            return ""
        return render_to_string("admin/advisors_app/reply_details.html", details)


@admin.register(Conversation)
class ConversationAdmin(ReadOnlyAdmin):
    """Conversations with their transcript; "Compact now" (action and button) for whoever may
    change conversations."""

    inlines = [ChatMessageInline]
    actions = ["compact_selected"]
    change_form_template = "admin/advisors_app/conversation/change_form.html"
    list_display = ("public_id", "shown_title", "owner", "message_total", "updated_at")
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

    @admin.display(description="Title", ordering="title")
    def shown_title(self, obj: Conversation) -> str:
        """The title without bidi controls, isolated (:mod:`advisors_app.security.bidi`)."""
        return isolated(obj.title)

    @admin.display(description="Messages", ordering="message_total")
    def message_total(self, obj: Conversation) -> int:
        return obj.message_total  # type: ignore[attr-defined, no-any-return]

    def has_compact_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        """Compacting appends to the log: Django's change permission on conversations (the
        page itself stays read-only)."""
        codename = get_permission_codename("change", self.opts)
        return request.user.has_perm(f"{self.opts.app_label}.{codename}")

    @admin.action(description="Compact now", permissions=("compact",))
    def compact_selected(self, request: HttpRequest, queryset: QuerySet[Conversation]) -> None:
        """Compact each selected conversation now; one message per conversation."""
        for conversation in queryset.select_related("chain_version").order_by("pk"):
            level, outcome = compact_conversation_now(conversation)
            self.message_user(request, outcome, level)

    def get_urls(self) -> list[URLPattern]:
        compact = path(
            "<path:object_id>/compact/",
            self.admin_site.admin_view(self.compact_view),
            name="advisors_app_conversation_compact",
        )
        return [compact, *super().get_urls()]

    def compact_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The page's "Compact now" button (POST only): compact, report, back to the page."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_compact_permission(request):
            raise PermissionDenied
        conversation = self.get_object(request, object_id)
        if conversation is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        level, outcome = compact_conversation_now(conversation)
        self.message_user(request, outcome, level)
        url = reverse("admin:advisors_app_conversation_change", args=[conversation.pk])
        return HttpResponseRedirect(url)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        may_compact = self.has_compact_permission(request)
        extra_context = {"can_compact": may_compact, **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra_context)
