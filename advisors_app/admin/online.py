"""Admin of online evaluation rules (issue 39): which live turns of a chain are scored, by
which evaluators, and what the judge may spend — with why judging stopped, when it did.

Standard model permissions (``add_onlineevaluation`` ...); the evaluators and filters are
checked against the evaluator registry, each problem shown on its field.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.utils.html import format_html_join
from django.utils.safestring import SafeString

from advisors_app.admin.widgets import TEXTAREA_OVERRIDES
from advisors_app.models import OnlineEvaluation
from advisors_app.online.aggregates import rolling_means
from advisors_app.online.rules import evaluators_errors, filters_errors

__all__ = ["OnlineEvaluationAdmin"]


class OnlineEvaluationForm(forms.ModelForm):
    class Meta:
        model = OnlineEvaluation
        fields = (
            "chain",
            "label",
            "arm",
            "sample_rate",
            "filters",
            "evaluators",
            "judge_model",
            "budget_usd",
            "enabled",
        )

    def clean_evaluators(self) -> Any:
        value = self.cleaned_data["evaluators"]
        errors = evaluators_errors(value)
        if errors:
            raise forms.ValidationError(errors)
        return value

    def clean_filters(self) -> Any:
        value = self.cleaned_data["filters"] or {}
        errors = filters_errors(value)
        if errors:
            raise forms.ValidationError(errors)
        return value


@admin.register(OnlineEvaluation)
class OnlineEvaluationAdmin(admin.ModelAdmin):
    form = OnlineEvaluationForm
    formfield_overrides = TEXTAREA_OVERRIDES
    list_display = (
        "chain",
        "label",
        "arm",
        "sample_rate",
        "enabled",
        "spent_usd",
        "budget_usd",
        "stopped_reason",
    )
    list_filter = ("enabled", "chain")
    readonly_fields = ("spent_usd", "stopped_reason", "created_at", "rolling")

    @admin.display(description="Rolling means (last 100 online scores)")
    def rolling(self, obj: OnlineEvaluation) -> SafeString | str:
        if obj.pk is None:
            return "-"
        rows = rolling_means(obj.chain.slug)
        if not rows:
            return "No online scores yet."
        return format_html_join(
            "",
            "<div>version {} {} · {}: mean {} over {}</div>",
            (
                (r["version"], f"arm {r['arm']}" if r["arm"] else "", r["key"], r["mean"], r["n"])
                for r in rows
            ),
        )

    def save_model(self, request: Any, obj: OnlineEvaluation, form: Any, change: bool) -> None:
        # A budget raised (or removed) lets the judge go on.
        if not obj.budget_used_up:
            obj.stopped_reason = ""
        super().save_model(request, obj, form, change)
