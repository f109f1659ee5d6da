"""Experiments in the admin: arms inline (version pickers of the chain), start / pause / stop
as actions, conclude from the change page (one button per arm), the per-arm results table and
charts of turns and error rate a day (:mod:`advisors_app.experiments.timeline`).

The same rules as the REST API (:mod:`advisors_app.experiments.editing`): a form error for
weights not summing to 10000, a version of another chain, an unknown guardrail metric or a
bad targeting rule; writing needs ``advisors_app.run_experiment``.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.urls import URLPattern, path, reverse

from advisors_app.admin.widgets import Textarea
from advisors_app.exceptions import Refusal
from advisors_app.experiments import status as statuses
from advisors_app.experiments.assignment import rule_errors
from advisors_app.experiments.editing import arm_errors, guardrail_errors
from advisors_app.experiments.lifecycle import conclude
from advisors_app.experiments.ramps import ramp_errors
from advisors_app.experiments.results import results
from advisors_app.experiments.timeline import svg_chart, timeline
from advisors_app.models import Experiment, ExperimentArm, ExperimentEvent

__all__ = ["ExperimentAdmin", "ExperimentArmInline"]

RUN_EXPERIMENT = "advisors_app.run_experiment"


class ArmFormSet(forms.BaseInlineFormSet):
    """The arms together: the shared rules (weights summing to 10000, versions of the chain);
    a running experiment keeps its arms' versions."""

    def clean(self) -> None:
        super().clean()
        if any(self.errors):
            return
        kept = [f for f in self.forms if f.cleaned_data and not f.cleaned_data.get("DELETE")]
        kept.sort(key=lambda f: f.cleaned_data.get("position") or 0)
        chain = getattr(self.instance, "chain", None) if self.instance.chain_id else None
        if chain is None:
            return  # the experiment's own form reports the missing chain
        arms = [
            {
                "name": f.cleaned_data.get("name"),
                "version": f.cleaned_data.get("version"),
                "weight": f.cleaned_data.get("weight"),
            }
            for f in kept
        ]
        errors, _ = arm_errors(chain, arms)
        problems = [m for messages_ in errors.values() for m in messages_]
        names = [arm["name"] for arm in arms]
        problems += [f"targeting: {m}" for m in rule_errors(self.instance.targeting, names)]
        if self.instance.pk and self.instance.status in Experiment.ACTIVE:
            stored = self.instance.arms.order_by("position").values_list("name", "version_id")
            if [(a["name"], getattr(a["version"], "pk", None)) for a in arms] != list(stored):
                problems.append("A running or paused experiment keeps its arms and versions.")
        if problems:
            raise forms.ValidationError(problems)


class ExperimentArmInline(admin.TabularInline):
    model = ExperimentArm
    formset = ArmFormSet
    extra = 0
    min_num = 2
    fields = ("position", "name", "version", "weight")

    # The arms are part of the experiment: whoever runs experiments edits them.
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm(RUN_EXPERIMENT))

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm(RUN_EXPERIMENT))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return bool(request.user.has_perm(RUN_EXPERIMENT))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or self.has_change_permission(request)

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "version":
            kwargs["queryset"] = db_field.related_model.objects.select_related("chain").order_by(
                "chain__slug", "-number"
            )
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ExperimentForm(forms.ModelForm):
    class Meta:
        model = Experiment
        fields = ["chain", "name", "label", "unit", "guardrails", "targeting", "ramp"]
        # The admin's Textarea folds the browser's CRLF line breaks, as every admin text box.
        widgets = {
            name: Textarea(attrs={"rows": 4, "cols": 80})
            for name in ("guardrails", "targeting", "ramp")
        }

    def clean_ramp(self) -> Any:
        value = self.cleaned_data["ramp"]
        problems = ramp_errors(value)
        if problems:
            raise forms.ValidationError(problems)
        return value

    def clean_guardrails(self) -> Any:
        value = self.cleaned_data["guardrails"]
        errors = guardrail_errors(value)
        if errors:
            raise forms.ValidationError([f"{k}: {m}" for k, ms in errors.items() for m in ms])
        return value

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.instance.pk and self.instance.status in Experiment.ACTIVE:
            for key in ("chain", "label", "unit"):
                if key in data and data[key] != getattr(self.instance, key):
                    self.add_error(key, "A running or paused experiment keeps this; stop it first.")
        return data


def _cell(figure: dict[str, Any], digits: int = 3, percent: bool = False) -> str:
    value = figure.get("value")
    if value is None:
        return "—"
    scale = 100 if percent else 1
    low, high = figure.get("low"), figure.get("high")
    shown = f"{value * scale:.{digits}g}"
    if low is not None and high is not None:
        shown += f" [{low * scale:.{digits}g}, {high * scale:.{digits}g}]"
    if (figure.get("vs_control") or {}).get("significant"):
        shown += " ★"
    return shown + (" %" if percent else "")


def _rows(experiment: Experiment) -> list[dict[str, Any]]:
    rows = []
    for arm in results(experiment)["arms"]:
        latency = arm["latency_ms"]
        p50, p95 = latency.get("p50"), latency.get("p95")
        scores = ", ".join(f"{k} {_cell(v)}" for k, v in arm["scores"].items()) or "—"
        cells = [
            _cell(arm["error_rate"], percent=True),
            _cell(arm["refusal_rate"], percent=True),
            f"{p50:.0f} / {p95:.0f}" if p50 is not None and p95 is not None else "—",
            _cell(arm["cost_per_turn"]),
            _cell(arm["thumbs_up_rate"], percent=True),
            scores,
        ]
        rows.append({**arm, "cells": cells})
    return rows


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    form = ExperimentForm
    inlines = [ExperimentArmInline]
    change_form_template = "admin/advisors_app/experiment/change_form.html"
    list_display = ("name", "chain", "label", "status", "unit", "started_at", "winner")
    list_filter = ("status", "chain")
    readonly_fields = (
        "status",
        "ramp_step",
        "winner",
        "revision",
        "started_at",
        "ended_at",
        "history",
    )
    actions = ("start_selected", "pause_selected", "stop_selected")

    def get_queryset(self, request: HttpRequest) -> QuerySet[Experiment]:
        return super().get_queryset(request).select_related("chain")

    def _runs(self, request: HttpRequest) -> bool:
        return bool(request.user.has_perm(RUN_EXPERIMENT))

    def has_add_permission(self, request: HttpRequest) -> bool:
        return self._runs(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self._runs(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        drafted = obj is None or obj.status == Experiment.Status.DRAFT
        return self._runs(request) and drafted

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_view_permission(request, obj) or self._runs(request)

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        super().save_related(request, form, formsets, change)
        form.instance.touch()  # every process reads the plan again on its next turn

    @admin.display(description="History")
    def history(self, obj: Experiment) -> str:
        events = ExperimentEvent.objects.filter(experiment=obj).select_related("actor")[:20]
        lines = [
            f"{e.at:%Y-%m-%d %H:%M} {e.from_status or 'new'} → {e.to_status} "
            f"by {e.actor or 'a guardrail'}: {e.reason}"
            for e in events
        ]
        return "\n".join(lines) or "—"

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, obj: Any = None, **kw: Any
    ) -> HttpResponse:
        if obj is not None and obj.pk:
            context["experiment_results"] = _rows(obj)
            days = timeline(obj)
            if days["days"]:
                context["experiment_charts"] = [
                    svg_chart({n: a["turns"] for n, a in days["arms"].items()}, "Turns a day"),
                    svg_chart(
                        {n: a["error_rate"] for n, a in days["arms"].items()}, "Error rate a day"
                    ),
                ]
            if self._runs(request) and obj.status != Experiment.Status.CONCLUDED:
                context["conclude_arms"] = list(obj.arms.values_list("name", flat=True))
        return super().render_change_form(request, context, *args, obj=obj, **kw)

    def get_urls(self) -> list[URLPattern]:
        own = [
            path(
                "<int:pk>/conclude/",
                self.admin_site.admin_view(self.conclude_view),
                name="advisors_app_experiment_conclude",
            )
        ]
        return own + super().get_urls()

    def conclude_view(self, request: HttpRequest, pk: int) -> HttpResponse:
        experiment = get_object_or_404(Experiment, pk=pk)
        back = reverse("admin:advisors_app_experiment_change", args=[pk])
        if request.method != "POST" or not self._runs(request):
            self.message_user(request, "Concluding needs run_experiment.", messages.ERROR)
            return HttpResponseRedirect(back)
        try:
            conclude(experiment, request.POST.get("winner"), user=request.user)
        except Refusal as exc:
            self.message_user(request, f"Not concluded: {exc}", messages.ERROR)
        else:
            self.message_user(
                request, f"Concluded: {experiment.label} now serves arm {experiment.winner}."
            )
        return HttpResponseRedirect(back)

    def _act(
        self, request: HttpRequest, queryset: QuerySet[Experiment], act: Any, verb: str
    ) -> None:
        for experiment in queryset:
            try:
                act(experiment, user=request.user, reason=f"{verb} in the admin")
            except Refusal as exc:
                self.message_user(request, f"{experiment}: {exc}", messages.ERROR)
            else:
                self.message_user(request, f"{experiment.name}: {verb}.")

    @admin.action(description="Start the selected experiments", permissions=["change"])
    def start_selected(self, request: HttpRequest, queryset: QuerySet[Experiment]) -> None:
        self._act(request, queryset, statuses.start, "started")

    @admin.action(description="Pause the selected experiments", permissions=["change"])
    def pause_selected(self, request: HttpRequest, queryset: QuerySet[Experiment]) -> None:
        self._act(request, queryset, statuses.pause, "paused")

    @admin.action(description="Stop the selected experiments", permissions=["change"])
    def stop_selected(self, request: HttpRequest, queryset: QuerySet[Experiment]) -> None:
        self._act(request, queryset, statuses.stop, "stopped")
