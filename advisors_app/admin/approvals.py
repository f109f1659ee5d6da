"""Admin of tool-call approvals: the "Pending approvals" list with approve / reject actions,
"allow for this conversation" grants with a revoke action, and the decisions as the call log
and the conversation transcript show them.

Rows are written by turns (:mod:`advisors_app.approvals.pauses`); nobody edits them here. An action
records a decision with :func:`~advisors_app.approvals.pauses.record_decision` — the same check
(owner or approver permission, still pending, not expired, allowed by the policy) the approvals API
runs — and, once every call of the paused reply has one, queues its resume
(:func:`advisors_app.approvals.jobs.enqueue_resume`): the admin never runs a turn itself. Seeing
the list needs the view permission on tool approvals (or the approver permission,
:data:`~advisors_app.models.approvals.DECIDE_PERMISSION`); acting on a row, that its user may
decide it (:meth:`~advisors_app.models.ToolApproval.may_decide`).
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Q, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from advisors_app.admin.forms import pretty_json
from advisors_app.approvals.pauses import DECISIONS_METADATA, record_decision
from advisors_app.core.memory import APPROVAL_PENDING
from advisors_app.core.tools.approval import ToolCallDecision
from advisors_app.memory.conversations import public_conversation_id
from advisors_app.models import CallLog, ChatMessage, Conversation, ToolApproval, ToolApprovalGrant
from advisors_app.models.approvals import DECIDE_PERMISSION

__all__ = [
    "PausedApprovalInline",
    "ResumedApprovalInline",
    "ToolApprovalAdmin",
    "ToolApprovalGrantAdmin",
    "approval_flags",
    "approval_inlines",
    "short_arguments",
]

#: Characters of a call's arguments a list shows (the detail page shows them whole).
SHORT_ARGUMENTS = 80
#: What a decision did, as a transcript line says it.
_DONE = {"approve": "approved", "edit": "edited and approved", "reject": "rejected"}


def short_arguments(arguments: Any) -> str:
    """A call's arguments as compact JSON, cut to :data:`SHORT_ARGUMENTS` characters (plain
    text: the admin escapes it)."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return text if len(text) <= SHORT_ARGUMENTS else text[: SHORT_ARGUMENTS - 1] + "…"


def conversation_link(conversation: Conversation) -> str:
    url = reverse("admin:advisors_app_conversation_change", args=[conversation.pk])
    return format_html(
        '<a href="{}">{}</a>', url, public_conversation_id(conversation.conversation_id)
    )


def _call_log_link(log: CallLog | None) -> str:
    if log is None:
        return "-"
    url = reverse("admin:advisors_app_calllog_change", args=[log.pk])
    return format_html('<a href="{}">{} ({})</a>', url, log.created, log.status)


def status_text(row: ToolApproval) -> str:
    """The row's status; a pending row decided outside a turn waits for its resume."""
    if row.status == ToolApproval.Status.PENDING and row.decided_at is not None:
        return f"{_DONE.get(row.decision, row.decision)}, waiting to resume"
    if row.expired:
        return "Pending (expired)"
    return row.get_status_display()


class ApprovalColumns:
    """Columns the approvals list, its detail page and the call log's inlines share."""

    @admin.display(description="Arguments")
    def short_arguments(self, row: ToolApproval) -> str:
        return short_arguments(row.arguments)

    @admin.display(description="Status", ordering="status")
    def status_text(self, row: ToolApproval) -> str:
        return status_text(row)


class StatusFilter(admin.SimpleListFilter):
    """Status, pending unless another is chosen: the list opens as "Pending approvals"."""

    title = "status"
    parameter_name = "status"
    ALL = "all"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [*ToolApproval.Status.choices, (self.ALL, "All")]

    def chosen(self) -> str:
        return self.value() or ToolApproval.Status.PENDING.value

    def choices(self, changelist: Any) -> Any:
        for value, title in self.lookup_choices:
            yield {
                "selected": self.chosen() == value,
                "query_string": changelist.get_query_string({self.parameter_name: value}),
                "display": title,
            }

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        chosen = self.chosen()
        return queryset if chosen == self.ALL else queryset.filter(status=chosen)


class ExpiredFilter(admin.SimpleListFilter):
    """Expired: marked so, or still pending past ``expires_at`` (nobody decided in time)."""

    title = "expired"
    parameter_name = "expired"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        expired = Q(status=ToolApproval.Status.EXPIRED) | Q(
            status=ToolApproval.Status.PENDING, expires_at__lte=timezone.now()
        )
        if self.value() == "yes":
            return queryset.filter(expired)
        if self.value() == "no":
            return queryset.exclude(expired)
        return queryset


class ReasonForm(forms.Form):
    reason = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 60}),
        help_text="Optional. The model reads it as the tool's result.",
    )


@admin.register(ToolApproval)
class ToolApprovalAdmin(ApprovalColumns, admin.ModelAdmin):
    list_display = (
        "tool",
        "short_arguments",
        "status_text",
        "user",
        "chain_slug",
        "conversation_link",
        "created_at",
        "expires",
        "decided_by",
        "decided_at",
    )
    list_filter = (StatusFilter, "tool", "chain_slug", ExpiredFilter)
    search_fields = ("tool", "user__username", "approval_id")
    list_select_related = ("user", "conversation", "decided_by")
    date_hierarchy = "created_at"
    actions = ("approve_selected", "reject_selected")
    fieldsets = (
        (
            "Call",
            {
                "fields": (
                    "tool",
                    "approval_id",
                    "status_text",
                    "user",
                    "chain_slug",
                    "conversation_link",
                    "arguments_json",
                    "reason_text",
                    "allowed_decisions",
                    "approver_permission",
                    "created_at",
                    "expires",
                )
            },
        ),
        (
            "Decision",
            {
                "fields": (
                    "decision",
                    "decided_by",
                    "decided_at",
                    "decision_reason",
                    "decided_arguments_json",
                )
            },
        ),
        ("Turns", {"fields": ("paused_turn", "resumed_turn")}),
    )
    readonly_fields = tuple(f for _, options in fieldsets for f in options["fields"])

    @admin.display(description="Conversation")
    def conversation_link(self, row: ToolApproval) -> str:
        return conversation_link(row.conversation)

    @admin.display(description="Expires", ordering="expires_at")
    def expires(self, row: ToolApproval) -> str:
        if row.expired:
            return format_html(
                '{} <strong class="approval-expired">expired</strong>', row.expires_at
            )
        return str(row.expires_at)

    @admin.display(description="Arguments")
    def arguments_json(self, row: ToolApproval) -> str:
        return format_html("<pre>{}</pre>", pretty_json(row.arguments))

    @admin.display(description="Arguments run (after an edit)")
    def decided_arguments_json(self, row: ToolApproval) -> str:
        if row.decided_arguments is None:
            return "-"
        return format_html("<pre>{}</pre>", pretty_json(row.decided_arguments))

    @admin.display(description="Turn that paused")
    def paused_turn(self, row: ToolApproval) -> str:
        return _call_log_link(row.call_log)

    @admin.display(description="Turn that ran the decision")
    def resumed_turn(self, row: ToolApproval) -> str:
        return _call_log_link(row.resumed_call_log)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or request.user.has_perm(DECIDE_PERMISSION)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_decide_permission(self, request: HttpRequest) -> bool:
        """Who sees the actions: whoever sees the list (each row is checked on its own)."""
        return self.has_view_permission(request)

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        status = request.GET.get(StatusFilter.parameter_name, ToolApproval.Status.PENDING.value)
        if status == ToolApproval.Status.PENDING.value:
            extra_context = {"title": "Pending approvals", **(extra_context or {})}
        return super().changelist_view(request, extra_context)

    @admin.action(description="Approve selected", permissions=("decide",))
    def approve_selected(
        self, request: HttpRequest, queryset: QuerySet[ToolApproval]
    ) -> HttpResponse | None:
        return self._decide(request, queryset, "approve")

    @admin.action(description="Reject selected", permissions=("decide",))
    def reject_selected(
        self, request: HttpRequest, queryset: QuerySet[ToolApproval]
    ) -> HttpResponse | None:
        return self._decide(request, queryset, "reject")

    def _decide(
        self, request: HttpRequest, queryset: QuerySet[ToolApproval], kind: str
    ) -> HttpResponse | None:
        """A confirmation page listing the calls (with a reason field for a rejection); once
        confirmed, one decision per row, refusals reported per row, and one resume per paused
        reply that every call of which is now decided."""
        rows = list(queryset.select_related("user", "conversation").order_by("pk"))
        form = ReasonForm(request.POST if request.POST.get("post") == "yes" else None)
        if not form.is_bound or not form.is_valid():
            return self._confirmation(request, rows, kind, form)
        reason = form.cleaned_data["reason"] or None
        decided, resume = 0, []
        for row in rows:
            decision = (
                ToolCallDecision.approve(row.approval_id)
                if kind == "approve"
                else ToolCallDecision.reject(row.approval_id, reason)
            )
            try:
                complete = record_decision(row, request.user, decision)
            except (PermissionError, ValueError) as exc:
                self.message_user(request, f"{row.tool} ({row.approval_id}): {exc}", messages.ERROR)
                continue
            decided += 1
            if complete and row.message_id not in resume:
                resume.append(row.message_id)
        if resume:
            # At call time: the task module pulls in the turn service and the consumers.
            from advisors_app.approvals.jobs import enqueue_resume

            for message_id in resume:
                enqueue_resume(message_id)
        if decided:
            turns = f"; {len(resume)} paused turn(s) resume now" if resume else ""
            self.message_user(
                request,
                f"{_DONE[kind].capitalize()} {decided} tool call(s){turns}.",
                messages.SUCCESS,
            )
        return None

    def _confirmation(
        self, request: HttpRequest, rows: list[ToolApproval], kind: str, form: ReasonForm
    ) -> TemplateResponse:
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"{kind.capitalize()} tool calls?",
            "kind": kind,
            "action": f"{kind}_selected",
            "form": form if kind == "reject" else None,
            "rows": [
                {
                    "row": row,
                    "arguments": pretty_json(row.arguments),
                    "status": status_text(row),
                    "may_decide": row.may_decide(request.user),
                }
                for row in rows
            ],
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(
            request, "admin/advisors_app/toolapproval/decide_selected.html", context
        )


class GrantStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "Active"), ("revoked", "Revoked")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() in ("active", "revoked"):
            return queryset.filter(revoked_at__isnull=self.value() == "active")
        return queryset


@admin.register(ToolApprovalGrant)
class ToolApprovalGrantAdmin(admin.ModelAdmin):
    """Grants are made by decisions ("allow for this conversation"); here: view and revoke. A
    grant may be revoked by its conversation's owner, an approver
    (:data:`~advisors_app.models.approvals.DECIDE_PERMISSION`) or a holder of the change
    permission on grants."""

    list_display = (
        "tool",
        "conversation_link",
        "granted_by",
        "created_at",
        "revoked_at",
        "revoked_by",
    )
    list_filter = (GrantStateFilter, "tool")
    search_fields = ("tool", "conversation__conversation_id", "granted_by__username")
    list_select_related = ("conversation", "granted_by", "revoked_by")
    actions = ("revoke_selected",)
    fields = list_display
    readonly_fields = fields

    @admin.display(description="Conversation")
    def conversation_link(self, grant: ToolApprovalGrant) -> str:
        return conversation_link(grant.conversation)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return self.has_view_permission(request)

    @staticmethod
    def may_revoke(user: Any, grant: ToolApprovalGrant) -> bool:
        return (
            grant.conversation.owner_id == user.pk
            or user.has_perm(DECIDE_PERMISSION)
            or user.has_perm("advisors_app.change_toolapprovalgrant")
        )

    @admin.action(description="Revoke selected", permissions=("revoke",))
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ToolApprovalGrant]) -> None:
        revoked = 0
        for grant in queryset.select_related("conversation").order_by("pk"):
            if grant.revoked_at is not None:
                continue
            if not self.may_revoke(request.user, grant):
                self.message_user(
                    request, f"{grant}: you may not revoke this grant.", messages.ERROR
                )
                continue
            # Conditional: a grant revoked meanwhile keeps who revoked it first.
            revoked += ToolApprovalGrant.objects.filter(
                pk=grant.pk, revoked_at__isnull=True
            ).update(revoked_at=timezone.now(), revoked_by=request.user)
        if revoked:
            self.message_user(
                request,
                f"Revoked {revoked} grant(s): those tools ask for approval again.",
                messages.SUCCESS,
            )


class _CallLogApprovalInline(ApprovalColumns, admin.TabularInline):
    model = ToolApproval
    fields = (
        "tool",
        "short_arguments",
        "status_text",
        "decided_by",
        "decided_at",
        "decision_reason",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class PausedApprovalInline(_CallLogApprovalInline):
    """The calls a turn paused for (``ToolApproval.call_log``)."""

    fk_name = "call_log"
    verbose_name = "tool call this turn paused for"
    verbose_name_plural = "Tool calls this turn paused for"


class ResumedApprovalInline(_CallLogApprovalInline):
    """The decisions a turn ran (``ToolApproval.resumed_call_log``)."""

    fk_name = "resumed_call_log"
    verbose_name = "decision this turn ran"
    verbose_name_plural = "Decisions this turn ran"


def approval_inlines(log: CallLog | None) -> list[type[admin.TabularInline]]:
    """The approval inlines a call log's page shows: those with rows (most turns have none)."""
    if log is None:
        return []
    return [
        inline
        for inline, rows in (
            (PausedApprovalInline, log.tool_approvals),  # type: ignore[attr-defined]
            (ResumedApprovalInline, log.resumed_tool_approvals),  # type: ignore[attr-defined]
        )
        if rows.exists()
    ]


def approval_flags(message: ChatMessage) -> str:
    """What a transcript shows of an assistant tool-call message's approvals (HTML; ``""``:
    nothing). Flagged ``approval_pending``: "waiting for approval" and the tools — or that
    the approvals expired (a new message came instead), or were decided and wait to resume;
    with ``tool_call_decisions`` (a resumed round): one line per decision, with who decided
    and the reason. Reads ``message.tool_approvals`` (prefetch them for a list)."""
    metadata = message.metadata if isinstance(message.metadata, dict) else {}
    rows = {row.approval_id: row for row in message.tool_approvals.all()}  # type: ignore[attr-defined]
    names = {c.get("id"): c.get("name", "?") for c in message.tool_calls if isinstance(c, dict)}
    if metadata.get(APPROVAL_PENDING):
        tools = format_html_join(", ", "<code>{}</code>", ((name,) for name in names.values()))
        states = {row.status for row in rows.values()}
        if states and ToolApproval.Status.PENDING not in states:
            label = "approval expired: not executed"
        elif any(row.decided_at for row in rows.values()):
            label = "decided, waiting to resume"
        else:
            label = "waiting for approval"
        return format_html(
            '<div class="approval-flags"><strong>{}</strong>: {}</div>', label, tools
        )
    decisions = [d for d in metadata.get(DECISIONS_METADATA) or [] if isinstance(d, dict)]
    if not decisions:
        return ""
    lines = []
    for decision in decisions:
        approval_id = decision.get("approval_id")
        row = rows.get(approval_id)
        who = ""
        if row is not None and row.decided_by is not None:
            who = f" by {row.decided_by}"
        if row is not None and row.decided_at is not None:
            who += f" at {row.decided_at:%Y-%m-%d %H:%M}"
        extra = ""
        if "arguments" in decision:
            extra = f" to {short_arguments(decision['arguments'])}"
        if decision.get("reason"):
            extra += f": {decision['reason']}"
        done = _DONE.get(str(decision.get("decision")), str(decision.get("decision")))
        lines.append((names.get(approval_id, "?"), done, who, extra))
    return format_html(
        '<span class="approval-flags">{}</span>',
        format_html_join("<br>", "<code>{}</code> {}{}{}", lines),
    )
