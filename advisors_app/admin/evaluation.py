"""Admin of evaluation (issue 22): datasets with their current items, runs with their progress
and results, starting a run, and two runs compared.

- **Datasets** list their current items (read-only here: an edit is a new item version, made
  by ``manage.py dataset_import``); the "Run evaluation" page
  (``/admin/advisors_app/dataset/<id>/run/``, also the action of the same name) asks for a
  chain, what to run (a label, a version number or ``draft``) and optionally the evaluators as
  JSON, and enqueues the run (:func:`advisors_app.evaluation.runs.submit_run`; a task worker runs
  it).
- **Runs** show status and progress (``done/total``), the summary per score key and every
  item's result (answer, scores, latency, error, call log); "Run again" enqueues a run of the
  same dataset, chain, target and evaluators (the dataset as of now). Each run's page lists the
  other finished runs of its dataset to compare with.
- The **compare page** (``/admin/advisors_app/evalrun/<a>/compare/<b>/``: ``a`` baseline,
  ``b`` candidate) shows per score key the means, pass rates and the mean delta with its
  bootstrap 95 % interval as a chart (Chart.js, vendored) and a table, then every item with its
  status and deltas, regressions first (:mod:`advisors_app.evaluation.compare`).

- **Promotion gates**: a chain's label (``production``) moves only to a version no worse than
  the one it serves on a dataset (:func:`advisors_app.evaluation.gate.gate_refusal`; the Promote
  page and ``PUT /api/chains/<slug>/labels/<name>/`` refuse the move otherwise).

- **Add to dataset** (:class:`AddToDatasetMixin`): the action of call logs and scores turns
  each selected turn into a dataset item (:mod:`advisors_app.evaluation.curation`) after a page
  asking for the dataset (or a new one's slug), whether to keep the earlier messages as
  history, which metadata key of the cited sources to expect (``topic``, as the demo's
  dataset), tags, and for a single turn a typed correction. It needs ``add_datasetitem``.

Runs and results are read-only; starting a run needs ``add_evalrun``, seeing them
``view_evalrun``.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import Truncator

from advisors_app.admin.widgets import TEXTAREA_OVERRIDES, Textarea
from advisors_app.evaluation.compare import REGRESSED, compare_runs
from advisors_app.evaluation.curation import (
    TurnOptions,
    add_replies,
    correction_of,
    user_message_of,
)
from advisors_app.evaluation.gate import DEFAULT_GATE_MARGIN
from advisors_app.evaluation.runs import EvalRunError, submit_run
from advisors_app.models import (
    AdvisorChain,
    ChatMessage,
    Dataset,
    DatasetItem,
    EvalResult,
    EvalRun,
    PromotionGate,
)

__all__ = [
    "AddToDatasetForm",
    "AddToDatasetMixin",
    "DatasetAdmin",
    "EvalRunAdmin",
    "PromotionGateAdmin",
    "RunEvaluationForm",
]

EXCERPT_CHARS = 80
#: Other runs of the dataset a run's page offers to compare with.
COMPARE_CHOICES = 20


class CurrentItemInline(admin.TabularInline):
    """The dataset's current items (read-only)."""

    model = DatasetItem
    fields = ("key", "message_excerpt", "expected", "tags", "valid_from")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    verbose_name = "current item"
    verbose_name_plural = "current items (edit by importing a file: an edit is a new version)"

    def get_queryset(self, request: HttpRequest) -> QuerySet[DatasetItem]:
        return super().get_queryset(request).filter(valid_to__isnull=True).order_by("key")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Message")
    def message_excerpt(self, obj: DatasetItem) -> str:
        return Truncator(obj.message).chars(EXCERPT_CHARS)


class RunEvaluationForm(forms.Form):
    """What a run evaluates: a chain, a label / version / draft, evaluators (JSON)."""

    chain = forms.ModelChoiceField(
        queryset=AdvisorChain.objects.filter(enabled=True).order_by("slug"),
        to_field_name="slug",
    )
    target = forms.CharField(
        initial="production",
        max_length=50,
        help_text='A label ("production", "staging"), a version number, or "draft".',
    )
    evaluators = forms.CharField(
        required=False,
        widget=Textarea(attrs={"rows": 4, "cols": 80}),
        help_text='JSON list of {"key": ..., "params": {...}}; blank: the defaults for what '
        "the items expect.",
    )

    def clean_evaluators(self) -> list[dict[str, Any]] | None:
        text = self.cleaned_data["evaluators"].strip()
        if not text:
            return None
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from exc
        if not isinstance(value, list):
            raise forms.ValidationError('Enter a JSON list of {"key", "params"} objects.')
        return value

    def target_kwargs(self) -> dict[str, Any]:
        target = self.cleaned_data["target"].strip()
        if target == "draft" or target.isdigit():
            return {"version": target}
        return {"label": target}


def _enqueue(request: HttpRequest, dataset: Dataset, **kwargs: Any) -> EvalRun | None:
    try:
        run = submit_run(dataset, created_by=request.user, **kwargs)
    except EvalRunError as exc:
        messages.error(request, str(exc))
        return None
    messages.success(request, f"Run {run.pk} queued: {run.total} items; a task worker runs it.")
    return run


@admin.register(Dataset)
class DatasetAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "current_count", "runs_link", "updated_at")
    search_fields = ("slug", "name", "description")
    fields = ("slug", "name", "description", "created_at", "updated_at", "run_link")
    readonly_fields = ("created_at", "updated_at", "run_link")
    inlines = (CurrentItemInline,)
    actions = ("run_evaluation",)
    formfield_overrides = TEXTAREA_OVERRIDES

    def get_urls(self) -> list[URLPattern]:
        run = path(
            "<int:dataset_id>/run/",
            self.admin_site.admin_view(self.run_view),
            name="advisors_app_dataset_run",
        )
        return [run, *super().get_urls()]

    @admin.display(description="Current items")
    def current_count(self, obj: Dataset) -> int:
        return obj.current_items().count()

    @admin.display(description="Runs")
    def runs_link(self, obj: Dataset) -> str:
        url = reverse("admin:advisors_app_evalrun_changelist") + f"?dataset__id__exact={obj.pk}"
        return format_html('<a href="{}">{}</a>', url, obj.runs.count())

    @admin.display(description="Evaluate")
    def run_link(self, obj: Dataset) -> str:
        if obj.pk is None:
            return "-"
        url = reverse("admin:advisors_app_dataset_run", args=[obj.pk])
        return format_html('<a class="button" href="{}">Run evaluation</a>', url)

    @admin.action(description="Run evaluation", permissions=["add_run"])
    def run_evaluation(self, request: HttpRequest, queryset: QuerySet[Dataset]) -> Any:
        if queryset.count() != 1:
            self.message_user(request, "Choose one dataset to run.", messages.WARNING)
            return None
        return HttpResponseRedirect(
            reverse("admin:advisors_app_dataset_run", args=[queryset.get().pk])
        )

    def has_add_run_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("advisors_app.add_evalrun")

    def run_view(self, request: HttpRequest, dataset_id: int) -> HttpResponse:
        """The "Run evaluation" page: a form, then the run enqueued."""
        if not self.has_add_run_permission(request):
            raise PermissionDenied
        dataset = get_object_or_404(Dataset, pk=dataset_id)
        form = RunEvaluationForm(request.POST if request.method == "POST" else None)
        if request.method == "POST" and form.is_valid():
            run = _enqueue(
                request,
                dataset,
                chain=form.cleaned_data["chain"].slug,
                evaluators=form.cleaned_data["evaluators"],
                **form.target_kwargs(),
            )
            if run is not None:
                return HttpResponseRedirect(
                    reverse("admin:advisors_app_evalrun_change", args=[run.pk])
                )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Run an evaluation on {dataset}",
            "dataset": dataset,
            "form": form,
            "items": dataset.current_items().count(),
        }
        return TemplateResponse(request, "admin/advisors_app/dataset_run.html", context)


class ResultInline(admin.TabularInline):
    model = EvalResult
    fields = (
        "item_key",
        "repeat",
        "output_excerpt",
        "shown_scores",
        "latency_ms",
        "error",
        "call_log_link",
    )
    readonly_fields = fields
    extra = 0
    can_delete = False

    def get_queryset(self, request: HttpRequest) -> QuerySet[EvalResult]:
        return super().get_queryset(request).select_related("call_log")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="Answer")
    def output_excerpt(self, obj: EvalResult) -> str:
        return Truncator(" ".join(obj.output.split())).chars(EXCERPT_CHARS)

    @admin.display(description="Scores")
    def shown_scores(self, obj: EvalResult) -> str:
        return format_html_join(
            "",
            '<div title="{}">{}: {}{}</div>',
            (
                (
                    score.get("comment", ""),
                    key,
                    score.get("value"),
                    {True: " ✔", False: " ✘"}.get(score.get("passed"), ""),
                )
                for key, score in obj.scores.items()
            ),
        )

    @admin.display(description="Call log")
    def call_log_link(self, obj: EvalResult) -> str:
        if obj.call_log_id is None:
            return "-"
        url = reverse("admin:advisors_app_calllog_change", args=[obj.call_log_id])
        return format_html('<a href="{}">{}</a>', url, obj.trace_id)


def _summary_html(run: EvalRun) -> str:
    rows = (run.summary or {}).get("evaluators") or {}
    if not rows:
        return "-"
    return format_html_join(
        "",
        "<div>{}: mean {}, pass rate {}</div>",
        (
            (
                key,
                "-" if row["mean"] is None else f"{row['mean']:.3f}",
                "-" if row["pass_rate"] is None else f"{row['pass_rate']:.1%}",
            )
            for key, row in rows.items()
        ),
    )


@admin.register(EvalRun)
class EvalRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "dataset",
        "chain_slug",
        "target",
        "status",
        "progress",
        "summary_text",
        "created_at",
        "created_by",
    )
    list_filter = ("status", "dataset", "chain_slug", "created_at")
    list_select_related = ("dataset", "created_by")
    search_fields = ("chain_slug", "dataset__slug", "label")
    fields = (
        "dataset",
        "as_of",
        "chain_slug",
        "target",
        "chain_version",
        "evaluators",
        "chat_options",
        "repeats",
        "status",
        "progress",
        "summary_text",
        "error",
        "created_by",
        "created_at",
        "started_at",
        "finished_at",
        "task_id",
        "compare_links",
    )
    readonly_fields = fields
    inlines = (ResultInline,)
    actions = ("run_again",)

    def get_urls(self) -> list[URLPattern]:
        compare = path(
            "<int:a>/compare/<int:b>/",
            self.admin_site.admin_view(self.compare_view),
            name="advisors_app_evalrun_compare",
        )
        return [compare, *super().get_urls()]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_add_run_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("advisors_app.add_evalrun")

    @admin.display(description="Ran")
    def target(self, obj: EvalRun) -> str:
        return obj.target_display()

    @admin.display(description="Progress")
    def progress(self, obj: EvalRun) -> str:
        return f"{obj.done}/{obj.total}"

    @admin.display(description="Summary")
    def summary_text(self, obj: EvalRun) -> str:
        return _summary_html(obj)

    @admin.display(description="Compare with")
    def compare_links(self, obj: EvalRun) -> str:
        """Links to compare this run (as candidate) with other finished runs of its dataset."""
        others = (
            EvalRun.objects.filter(dataset_id=obj.dataset_id, status=EvalRun.Status.DONE)
            .exclude(pk=obj.pk)
            .order_by("-created_at")[:COMPARE_CHOICES]
        )
        links = [
            (
                reverse("admin:advisors_app_evalrun_compare", args=[other.pk, obj.pk]),
                f"run {other.pk}: {other.chain_slug} {other.target_display()}",
            )
            for other in others
        ]
        if not links:
            return "-"
        return format_html_join(" · ", '<a href="{}">{}</a>', links)

    @admin.action(
        description="Run again (same dataset, chain, target, evaluators)", permissions=["add_run"]
    )
    def run_again(self, request: HttpRequest, queryset: QuerySet[EvalRun]) -> None:
        for run in queryset.select_related("dataset"):
            target: dict[str, Any] = (
                {"version": run.version_asked} if run.version_asked else {"label": run.label}
            )
            _enqueue(
                request,
                run.dataset,
                chain=run.chain_slug,
                evaluators=run.evaluators,
                repeats=run.repeats,
                chat_options=run.chat_options,
                **target,
            )

    def compare_view(self, request: HttpRequest, a: int, b: int) -> HttpResponse:
        """Run ``a`` (baseline) against run ``b`` (candidate)."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        baseline = get_object_or_404(EvalRun.objects.select_related("dataset"), pk=a)
        candidate = get_object_or_404(EvalRun.objects.select_related("dataset"), pk=b)
        comparison = compare_runs(baseline, candidate)
        items = sorted(comparison.items, key=lambda item: (item.status != REGRESSED, item.key))
        chart = {
            "labels": list(comparison.scores),
            "baseline": [s.baseline_mean for s in comparison.scores.values()],
            "candidate": [s.candidate_mean for s in comparison.scores.values()],
            "delta": [s.delta for s in comparison.scores.values()],
            "low": [s.ci_low for s in comparison.scores.values()],
            "high": [s.ci_high for s in comparison.scores.values()],
            "names": [f"run {a} (baseline)", f"run {b} (candidate)"],
        }
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Run {b} compared with run {a}",
            "baseline": baseline,
            "candidate": candidate,
            "comparison": comparison,
            "counts": comparison.counts(),
            "scores": list(comparison.scores.values()),
            "items": [
                {
                    "key": item.key,
                    "status": item.status,
                    "deltas": [
                        (key, delta, item.baseline.get(key), item.candidate.get(key))
                        for key, delta in item.deltas.items()
                    ],
                    "errors": (item.baseline_error, item.candidate_error),
                }
                for item in items
            ],
            "chart": chart,
            "other_dataset": baseline.dataset_id != candidate.dataset_id,
        }
        return TemplateResponse(request, "admin/advisors_app/evalrun_compare.html", context)


class PromotionGateForm(forms.ModelForm):
    class Meta:
        model = PromotionGate
        fields = (
            "chain",
            "label",
            "dataset",
            "evaluators",
            "margin",
            "max_regressions",
            "min_delta",
            "enabled",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["margin"].required = False  # blank: the default margin

    def clean_margin(self) -> float:
        margin = self.cleaned_data["margin"]
        return DEFAULT_GATE_MARGIN if margin is None else margin

    def clean_evaluators(self) -> Any:
        from advisors_app.evaluation.evaluators import evaluator_registry

        value = self.cleaned_data["evaluators"] or []
        if not isinstance(value, list):
            raise forms.ValidationError('Enter a JSON list of {"key", "params"} objects.')
        for index, entry in enumerate(value):
            if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
                raise forms.ValidationError(f'Evaluator {index}: expected {{"key", "params"?}}.')
            for field, problems in evaluator_registry.params_errors(
                entry["key"], entry.get("params") or {}
            ).items():
                raise forms.ValidationError(f"Evaluator {index}: {field}: {' '.join(problems)}")
        return value


@admin.register(PromotionGate)
class PromotionGateAdmin(admin.ModelAdmin):
    form = PromotionGateForm
    formfield_overrides = TEXTAREA_OVERRIDES
    list_display = (
        "chain",
        "label",
        "dataset",
        "margin",
        "max_regressions",
        "min_delta",
        "enabled",
    )
    list_filter = ("enabled", "label")
    list_select_related = ("chain", "dataset")


class AddToDatasetForm(forms.Form):
    """Where and how the selected turns become items (:class:`~advisors_app.evaluation.curation.
    TurnOptions`); ``single``: one turn is selected, so a correction may be typed."""

    dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.order_by("slug"), required=False, empty_label="(a new dataset)"
    )
    new_dataset = forms.SlugField(
        required=False, max_length=100, help_text="The slug of a new dataset (or an existing one)."
    )
    history = forms.BooleanField(
        required=False, initial=True, help_text="Keep the conversation's earlier messages."
    )
    documents_key = forms.CharField(
        required=False,
        max_length=100,
        initial="topic",
        help_text="Expect documents whose metadata under this key is one the reply cited "
        '(the demo\'s dataset uses "topic"); blank: no expected documents.',
    )
    tags = forms.CharField(required=False, max_length=500, help_text="Comma-separated.")
    correction = forms.CharField(
        required=False,
        max_length=20_000,
        widget=Textarea(attrs={"rows": 4, "cols": 80}),
        help_text="The answer the reply should have given: the expected output instead.",
    )

    def __init__(self, *args: Any, single: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not single:
            del self.fields["correction"]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if not data.get("dataset") and not data.get("new_dataset"):
            raise forms.ValidationError("Choose a dataset or give a new one's slug.")
        return data

    def target(self) -> Dataset:
        """The chosen dataset, created by slug when new."""
        if self.cleaned_data["new_dataset"]:
            dataset, _ = Dataset.objects.get_or_create(slug=self.cleaned_data["new_dataset"])
            return dataset
        return self.cleaned_data["dataset"]  # type: ignore[no-any-return]

    def options(self) -> TurnOptions:
        tags = (tag.strip() for tag in self.cleaned_data["tags"].split(","))
        return TurnOptions(
            history=self.cleaned_data["history"],
            documents_key=self.cleaned_data["documents_key"].strip(),
            correction=self.cleaned_data.get("correction", "").strip(),
            tags=tuple(tag for tag in tags if tag),
        )


class AddToDatasetMixin:
    """The "Add to dataset" action of a model admin whose rows lead to replies
    (:meth:`dataset_replies`): a page with :class:`AddToDatasetForm`, then the items upserted.
    Needs ``advisors_app.add_datasetitem``."""

    admin_site: admin.AdminSite
    opts: Any

    def dataset_replies(self, queryset: QuerySet[Any]) -> tuple[list[ChatMessage], list[str]]:
        """The stored replies of the selected rows, and why some rows have none."""
        raise NotImplementedError

    def has_add_dataset_item_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("advisors_app.add_datasetitem")

    @admin.action(description="Add to dataset", permissions=["add_dataset_item"])
    def add_to_dataset(self, request: HttpRequest, queryset: QuerySet[Any]) -> Any:
        replies, skipped = self.dataset_replies(queryset)
        form = AddToDatasetForm(
            request.POST if "post" in request.POST else None, single=len(replies) == 1
        )
        if "post" in request.POST and form.is_valid():
            dataset = form.target()
            report = add_replies(dataset, replies, form.options())
            report.skipped[:0] = skipped
            added = report.imported.created or report.imported.changed
            level = messages.SUCCESS if added else messages.WARNING
            messages.add_message(request, level, f"Dataset {dataset.slug}: {report}.")
            for reason in report.skipped:
                messages.warning(request, f"Skipped {reason}.")
            return None
        turns = [
            {
                "reply": reply,
                "asked": user_message_of(reply),
                "correction": correction_of(reply),
            }
            for reply in replies
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": "Add to a dataset",
            "form": form,
            "turns": turns,
            "skipped": skipped,
            "selected": request.POST.getlist(helpers.ACTION_CHECKBOX_NAME),
            "select_across": request.POST.get("select_across", "0"),
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/advisors_app/add_to_dataset.html", context)
