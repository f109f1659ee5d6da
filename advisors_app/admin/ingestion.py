"""Admin of ingestion jobs: every upload's progress and outcome, read-only.

Jobs are made by uploads (the REST API, the collection page's upload, ``manage.py ingest
--async``) and run by task workers; here staff follow them. A job's page reloads itself every
two seconds until the job ends.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from advisors_app.models import IngestionJob

__all__ = ["IngestionJobAdmin"]

#: Seconds between reloads of an unfinished job's page.
REFRESH_SECONDS = 2


@admin.register(IngestionJob)
class IngestionJobAdmin(admin.ModelAdmin):
    list_display = ("created_at", "files", "status", "progress_bar", "collection", "created_by")
    list_filter = ("status", "collection")
    search_fields = ("id", "sources", "created_by__username")
    list_select_related = ("collection", "created_by")
    date_hierarchy = "created_at"
    change_form_template = "admin/advisors_app/ingestionjob/change_form.html"
    fields = (
        "id",
        "collection",
        "files",
        "created_by",
        "owner",
        "tenant",
        "status",
        "progress_bar",
        "error_list",
        "result_list",
        "bytes",
        "cpu_seconds",
        "metadata",
        "options",
        "limits",
        "task_id",
        "created_at",
        "started_at",
        "finished_at",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[IngestionJob]:
        return super().get_queryset(request).defer("metadata", "limits", "options")

    @admin.display(description="Files")
    def files(self, job: IngestionJob) -> str:
        return ", ".join(job.sources)

    @admin.display(description="Progress")
    def progress_bar(self, job: IngestionJob) -> str:
        if job.status == IngestionJob.Status.QUEUED:
            return "waiting for a worker"
        if job.status == IngestionJob.Status.FAILED and job.errors:
            message = job.errors[0]["message"]
            return message if len(message) <= 90 else message[:89] + "…"
        if not job.total:
            if job.status == IngestionJob.Status.DONE:
                return "nothing new to embed"
            return "reading" if job.status == IngestionJob.Status.RUNNING else "—"
        return format_html(
            '<progress value="{}" max="{}"></progress> {} / {} chunks',
            job.done,
            job.total,
            job.done,
            job.total,
        )

    @admin.display(description="Errors")
    def error_list(self, job: IngestionJob) -> str:
        return format_html_join(
            "\n",
            "<div>{}{}</div>",
            ((f"{e['source']}: " if e.get("source") else "", e["message"]) for e in job.errors),
        )

    @admin.display(description="Stored")
    def result_list(self, job: IngestionJob) -> str:
        return format_html_join(
            "\n",
            "<div>{}: {} chunks ({} added, {} unchanged, {} removed)</div>",
            (
                (d["source"], d["chunks"], d["added"], d["unchanged"], d["removed"])
                for d in job.documents
            ),
        )

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def render_change_form(
        self, request: HttpRequest, context: dict[str, Any], *args: Any, **kwargs: Any
    ) -> Any:
        job = context.get("original")
        context["refresh_seconds"] = (
            REFRESH_SECONDS if job is not None and not job.finished else None
        )
        return super().render_change_form(request, context, *args, **kwargs)
