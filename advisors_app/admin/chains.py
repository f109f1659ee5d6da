"""Admin of chains: advisor rows inline, the chain lint, the type reference, the version
workflow (:mod:`advisors_app.admin.publishing`) and the playground."""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html

from advisors_app.admin.chain_picture import turn_picture
from advisors_app.admin.dashboard import dashboard
from advisors_app.admin.forms import (
    AdvisorChainForm,
    AdvisorConfigForm,
    AdvisorConfigFormSet,
    PlaygroundForm,
    lint_list,
    params_help,
    pretty_json,
)
from advisors_app.admin.param_forms import form_specs
from advisors_app.admin.playground_compare import playground_compare
from advisors_app.admin.publishing import ChainWorkflowAdmin
from advisors_app.admin.traces import trace_rows
from advisors_app.admin.widgets import TEXTAREA_OVERRIDES
from advisors_app.core.serialization import to_jsonable
from advisors_app.definition import Checked, check_draft
from advisors_app.definition.registry import advisor_types
from advisors_app.memory.conversations import unlist
from advisors_app.models import AdvisorChain, AdvisorConfig, CallLog
from advisors_app.orders import format_order
from advisors_app.security.redaction import redact
from advisors_app.turn import call_turn
from advisors_app.turn.events import TurnError, error_event

__all__ = ["AdvisorChainAdmin", "AdvisorConfigInline"]


class AdvisorConfigInline(admin.TabularInline):
    """The chain's advisors, one row each: type, order (drag or move to reorder; the effective
    order outermost to innermost is recomputed as you go), enabled, and a params form drawn
    from the type's JSON Schema (``static/advisors_app/chain-editor.js``)."""

    model = AdvisorConfig
    form = AdvisorConfigForm
    formset = AdvisorConfigFormSet
    formfield_overrides = TEXTAREA_OVERRIDES
    extra = 1
    fields = ("advisor_type", "order", "effective", "enabled", "params")
    readonly_fields = ("effective",)

    @admin.display(description="Runs at")
    def effective(self, obj: AdvisorConfig) -> str:
        return format_order(obj.effective_order) if obj.pk else "-"


def type_reference() -> list[dict[str, Any]]:
    """Every registered advisor type, for the reference table on the chain page."""
    return [
        {
            "key": t.key,
            "label": t.label,
            "order": format_order(t.default_order),
            "roles": ", ".join(sorted(t.roles)),
            "description": t.description,
            "params": params_help(t.key),
        }
        for t in advisor_types
    ]


def draft_check(chain: AdvisorChain) -> Checked:
    """``check_draft(chain)``, run once per loaded chain: the page's lint field and its
    draft-vs-production banner read the same result."""
    checked: Checked | None = chain.__dict__.get("_draft_check")
    if checked is None:
        checked = chain.__dict__["_draft_check"] = check_draft(chain)
    return checked


@admin.register(AdvisorChain)
class AdvisorChainAdmin(ChainWorkflowAdmin):
    form = AdvisorChainForm
    formfield_overrides = TEXTAREA_OVERRIDES
    inlines = [AdvisorConfigInline]
    change_form_template = "admin/advisors_app/advisorchain/change_form.html"
    list_display = ("name", "slug", "chat_model", "enabled", "advisor_count", "updated_at")
    list_display_links = ("name",)
    list_filter = ("enabled", "chat_model")
    search_fields = ("slug", "name", "description")
    prepopulated_fields = {"slug": ("name",)}
    readonly_fields = ("lint",)
    fieldsets = (
        (None, {"fields": ("slug", "name", "description", "enabled")}),
        ("Model and prompt", {"fields": ("chat_model", "system_prompt", "system_template")}),
        ("Options and tools", {"fields": ("default_options", "tools")}),
        ("Versions", {"fields": ("version_policy",)}),
        ("Checks", {"fields": ("lint",)}),
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[AdvisorChain]:
        return super().get_queryset(request).annotate(advisor_total=Count("advisors"))

    @admin.display(description="Advisors", ordering="advisor_total")
    def advisor_count(self, obj: AdvisorChain) -> int:
        return obj.advisor_total  # type: ignore[attr-defined, no-any-return]

    @admin.display(description="Chain lint")
    def lint(self, obj: AdvisorChain) -> str:
        if obj.pk is None:
            return "Runs when the chain is saved."
        return lint_list(list(draft_check(obj).messages))

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        for formset in formsets:
            for found in getattr(formset, "lint_messages", ()):
                if not found.is_error:
                    messages.warning(request, f"{found.id}: {found}")

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> HttpResponse:
        context["advisor_types"] = type_reference()
        context["params_forms"] = form_specs(advisor_types)
        chain = context.get("original")
        context["playground_form"] = PlaygroundForm(chain=chain)
        if chain is not None and chain.pk is not None:
            context.update(self.version_panel(request, chain, draft_check(chain)))
        return super().render_change_form(request, context, *args, **kwargs)

    def get_urls(self) -> list[URLPattern]:
        playground = path(
            "<path:object_id>/playground/",
            self.admin_site.admin_view(self.playground_view),
            name="advisors_app_advisorchain_playground",
        )
        dashboard_url = path(
            "dashboard/",
            self.admin_site.admin_view(self.dashboard_view),
            name="advisors_app_dashboard",
        )
        compare = path(
            "<path:object_id>/playground/compare/",
            self.admin_site.admin_view(self.playground_compare_view),
            name="advisors_app_advisorchain_playground_compare",
        )
        return [dashboard_url, compare, playground, *super().get_urls()]

    def playground_compare_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """One message to two versions (or the draft and a label), side by side."""
        return playground_compare(self, request, object_id)

    def dashboard_view(self, request: HttpRequest) -> HttpResponse:
        """Turns, latency, errors, refusals, tokens and cost per day, chain and version."""
        return dashboard(self, request)

    def playground_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Send a message through the draft, a label or a version; show the reply, final prompt
        and trace."""
        chain = self.get_object(request, object_id)
        if chain is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        # Running a chain spends model time (and money): editors only.
        if not self.has_change_permission(request, chain):
            raise PermissionDenied
        form = PlaygroundForm(request.POST or None, chain=chain)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": chain,
            "title": f"Playground: {chain}",
            "form": form,
            "change_url": reverse("admin:advisors_app_advisorchain_change", args=[chain.pk]),
        }
        if request.method == "POST" and form.is_valid():
            outcome = self._run(request, chain, form.cleaned_data, form.target())
            context.update(outcome)
            if "result" in outcome:  # the next message continues this conversation
                context["form"] = PlaygroundForm(
                    initial={
                        "run": form.cleaned_data["run"],
                        "conversation_id": outcome["result"].conversation_id,
                        "params": form.cleaned_data["params"] or None,
                    },
                    chain=chain,
                )
        return TemplateResponse(request, "admin/advisors_app/advisorchain/playground.html", context)

    def _run(
        self,
        request: HttpRequest,
        chain: AdvisorChain,
        data: dict[str, Any],
        target: dict[str, Any],
    ) -> dict[str, Any]:
        try:
            result = async_to_sync(call_turn)(
                chain.slug,
                request.user,
                data["message"],
                conversation_id=data["conversation_id"] or None,
                params=data["params"],
                trace_payloads=True,  # the playground shows each advisor's request and response
                **target,
            )
        except TurnError as exc:
            return {"refused": exc}
        except Exception as exc:  # shown to the operator; the call log has it too
            event = error_event(exc)
            detail = redact(str(exc))  # a provider may quote the key back
            return {"failure": {"type": type(exc).__name__, "detail": detail, "code": event.code}}
        if result.conversation_id and not data["conversation_id"]:
            # A test of the chain, not one of the staff member's chats: out of their sidebar.
            unlist(request.user, result.conversation_id)
        log = CallLog.objects.filter(trace_id=result.trace_id).first()
        ran = "the draft" if result.version is None else f"v{result.version}"
        return {
            "result": result,
            "ran": f"{ran} (label {target['label']})" if "label" in target else ran,
            "metadata": pretty_json(result.metadata),
            "prompt_messages": (result.prompt or {}).get("messages", []),
            "prompt_options": pretty_json((result.prompt or {}).get("options")),
            "trace_rows": trace_rows(result.trace),
            "picture": turn_picture(chain, result.version, result.trace, f"Ran {ran}."),
            "log_url": reverse("admin:advisors_app_calllog_change", args=[log.pk]) if log else "",
            "usage": to_jsonable(result.usage),
        }


def chain_link(chain: AdvisorChain | None, fallback: str = "") -> str:
    """A link to the chain's admin page (``fallback`` text when it was deleted)."""
    if chain is None:
        return fallback
    url = reverse("admin:advisors_app_advisorchain_change", args=[chain.pk])
    return format_html('<a href="{}">{}</a>', url, chain.slug)
