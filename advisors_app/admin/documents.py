"""Admin of collections and their documents, with file upload as an ingestion job."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from advisors_app.admin.protected import ReferencedByVersionsAdmin
from advisors_app.admin.widgets import TEXTAREA_OVERRIDES
from advisors_app.conf import app_settings
from advisors_app.ingestion.jobs import Upload, submit_job
from advisors_app.ingestion.parsing import check_supported
from advisors_app.models import Collection, Document
from advisors_app.security.bidi import isolated, without_bidi_controls

__all__ = ["CollectionAdmin", "DocumentAdmin", "UploadForm"]


class UploadForm(forms.Form):
    """Files to ingest into one collection; each file is one source (re-uploading updates it)."""

    file = forms.FileField(help_text=".txt, .md, .html or .pdf")
    name = forms.CharField(
        required=False, max_length=500, help_text="Source name (default: the file name)."
    )
    owner = forms.ModelChoiceField(
        queryset=get_user_model()._default_manager.all(),
        required=False,
        help_text="Only this user may retrieve the documents; empty: shared.",
    )

    def clean_file(self) -> Any:
        upload = self.cleaned_data["file"]
        limit = app_settings.MAX_UPLOAD_BYTES
        if limit and upload.size > limit:
            raise forms.ValidationError(
                f"{upload.name} is larger than {limit} bytes (ADVISORS['MAX_UPLOAD_BYTES'])."
            )
        try:
            check_supported(upload.name, upload.content_type)
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None
        return upload


@admin.register(Collection)
class CollectionAdmin(ReferencedByVersionsAdmin):
    list_display = (
        "slug",
        "name",
        "owner",
        "tenant",
        "ef_search",
        "document_total",
        "updated_at",
    )
    search_fields = ("slug", "name", "description")
    list_filter = ("tenant",)
    prepopulated_fields = {"slug": ("name",)}
    formfield_overrides = TEXTAREA_OVERRIDES
    change_form_template = "admin/advisors_app/collection/change_form.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Collection]:
        return super().get_queryset(request).annotate(document_total=Count("documents"))

    @admin.display(description="Documents", ordering="document_total")
    def document_total(self, obj: Collection) -> int:
        return obj.document_total  # type: ignore[attr-defined, no-any-return]

    def get_urls(self) -> list[URLPattern]:
        upload = path(
            "<path:object_id>/upload/",
            self.admin_site.admin_view(self.upload_view),
            name="advisors_app_collection_upload",
        )
        return [upload, *super().get_urls()]

    def upload_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Queue an uploaded file for a task worker and show its job (progress, outcome)."""
        collection = self.get_object(request, object_id)
        if collection is None:
            return self._get_obj_does_not_exist_redirect(request, self.opts, object_id)
        if not self.has_change_permission(request, collection):
            raise PermissionDenied
        form = UploadForm(request.POST or None, request.FILES or None)
        if request.method == "POST" and form.is_valid():
            upload = form.cleaned_data["file"]
            name = form.cleaned_data["name"] or upload.name
            job = submit_job(
                collection,
                [Upload(name, upload.read(), upload.content_type or "")],
                created_by=request.user,
                owner=form.cleaned_data["owner"],
            )
            messages.success(
                request, f"Queued {name} for ingestion; this page follows its progress."
            )
            url = reverse("admin:advisors_app_ingestionjob_change", args=[job.pk])
            return HttpResponseRedirect(url)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "original": collection,
            "title": f"Upload documents to {collection}",
            "form": form,
            "change_url": reverse("admin:advisors_app_collection_change", args=[collection.pk]),
        }
        return TemplateResponse(request, "admin/advisors_app/collection/upload.html", context)


class SourceFilter(admin.AllValuesFieldListFilter):
    """The documents' sources as choices, without bidi controls
    (:mod:`advisors_app.security.bidi`)."""

    def choices(self, changelist: Any) -> Any:
        for choice in super().choices(changelist):
            yield {**choice, "display": without_bidi_controls(str(choice["display"]))}


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    """Chunks are written by ingestion (upload on the collection page); here: view and delete."""

    list_display = ("shown_source", "collection", "owner", "snippet", "created_at")
    list_filter = ("collection", ("source", SourceFilter))
    search_fields = ("source", "content")
    list_select_related = ("collection", "owner")
    fields = ("id", "collection", "owner", "tenant", "source", "content", "metadata", "created_at")
    readonly_fields = fields

    @admin.display(description="Source", ordering="source")
    def shown_source(self, obj: Document) -> str:
        """The file name without bidi controls, isolated (:mod:`advisors_app.security.bidi`)."""
        return isolated(obj.source)

    @admin.display(description="Text")
    def snippet(self, obj: Document) -> str:
        return obj.content[:80]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
