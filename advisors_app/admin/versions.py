"""Admin of chain versions, labels and the label history: records, never edited here.

Versions are immutable and labels move only through the chain page's Promote and Roll back
(:mod:`advisors_app.admin.publishing`), so that every move is recorded.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Prefetch, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from advisors_app.admin.chains import chain_link
from advisors_app.admin.forms import pretty_json
from advisors_app.models import ChainLabel, ChainLabelEvent, ChainVersion

__all__ = [
    "ChainLabelAdmin",
    "ChainLabelEventAdmin",
    "ChainVersionAdmin",
    "RecordAdmin",
]


class RecordAdmin(admin.ModelAdmin):
    """Rows the version workflow writes: viewable, never added or changed in the admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # Never deleted from their own pages; but a chain's delete page asks too (its versions,
        # labels and history go with it), and there the model permission decides.
        match = request.resolver_match
        own = f"{self.opts.app_label}_{self.opts.model_name}_"
        if match is None or (match.url_name or "").startswith(own):
            return False
        return super().has_delete_permission(request, obj)


def _version_link(version: ChainVersion | None) -> str:
    if version is None:
        return "-"
    url = reverse("admin:advisors_app_chainversion_change", args=[version.pk])
    return format_html('<a href="{}">{}</a>', url, version)


@admin.register(ChainVersion)
class ChainVersionAdmin(RecordAdmin):
    list_display = ("version", "chain", "message", "created_by", "created_at", "parent", "labels")
    list_display_links = ("version",)
    list_filter = ("chain",)
    list_select_related = ("chain", "created_by", "parent")
    search_fields = ("chain__slug", "message", "snapshot_hash")
    fields = (
        "chain_page",
        "number",
        "message",
        "created_by",
        "created_at",
        "parent",
        "labels",
        "snapshot_hash",
        "references",
        "snapshot_json",
    )
    readonly_fields = fields

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChainVersion]:
        by_name = ChainLabel.objects.order_by("name")
        return super().get_queryset(request).prefetch_related(Prefetch("labels", by_name))

    @admin.display(description="Version", ordering="number")
    def version(self, obj: ChainVersion) -> str:
        return str(obj)

    @admin.display(description="Chain")
    def chain_page(self, obj: ChainVersion) -> str:
        diff = reverse("admin:advisors_app_advisorchain_diff", args=[obj.chain_id])
        return format_html(
            '{} &middot; <a href="{}?from={}&amp;to=draft">diff with the draft</a>',
            chain_link(obj.chain),
            diff,
            obj.number,
        )

    @admin.display(description="Labels")
    def labels(self, obj: ChainVersion) -> str:
        return ", ".join(label.name for label in obj.labels.all()) or "-"

    @admin.display(description="Snapshot")
    def snapshot_json(self, obj: ChainVersion) -> str:
        return format_html('<pre style="white-space: pre-wrap">{}</pre>', pretty_json(obj.snapshot))


@admin.register(ChainLabel)
class ChainLabelAdmin(RecordAdmin):
    """Labels, listed; they move through the chain page's Promote, which records each move."""

    list_display = ("name", "chain", "serves", "updated_at", "promote")
    list_filter = ("name", "chain")
    list_select_related = ("chain", "version")
    search_fields = ("name", "chain__slug")
    fields = ("chain", "name", "serves", "updated_at")
    readonly_fields = fields

    @admin.display(description="Serves")
    def serves(self, obj: ChainLabel) -> str:
        return _version_link(obj.version)

    @admin.display(description="")
    def promote(self, obj: ChainLabel) -> str:
        url = reverse("admin:advisors_app_advisorchain_promote", args=[obj.chain_id])
        return format_html('<a href="{}?label={}">Promote…</a>', url, obj.name)


@admin.register(ChainLabelEvent)
class ChainLabelEventAdmin(RecordAdmin):
    """Who moved which label from which version to which, when and why."""

    list_display = ("at", "chain", "label_name", "move", "actor", "reason")
    list_filter = ("label__chain", "label__name", "at")
    list_select_related = ("label__chain", "from_version", "to_version", "actor")
    date_hierarchy = "at"
    search_fields = ("label__chain__slug", "label__name", "reason", "actor__username")
    fields = ("at", "chain", "label_name", "from_link", "to_link", "actor", "reason")
    readonly_fields = fields

    @admin.display(description="Chain", ordering="label__chain__slug")
    def chain(self, obj: ChainLabelEvent) -> str:
        return chain_link(obj.label.chain)

    @admin.display(description="Label", ordering="label__name")
    def label_name(self, obj: ChainLabelEvent) -> str:
        return obj.label.name

    @admin.display(description="Move")
    def move(self, obj: ChainLabelEvent) -> str:
        before = obj.from_version or "none"
        return f"{before} → {obj.to_version}"

    @admin.display(description="From")
    def from_link(self, obj: ChainLabelEvent) -> str:
        return _version_link(obj.from_version)

    @admin.display(description="To")
    def to_link(self, obj: ChainLabelEvent) -> str:
        return _version_link(obj.to_version)
