"""Deleting a row that a labelled chain version refers to: a refusal on the delete page.

The ``pre_delete`` receiver of :mod:`advisors_app.security.protection` refuses such deletes with
``ProtectedError``; the admin collects what a delete would remove without sending signals, so
it asks :func:`~advisors_app.security.protection.protecting_versions` itself and lists the versions
the way it lists any protected object (the delete page and the bulk delete action both read it).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from advisors_app.definition.snapshot import drafts_referring_to
from advisors_app.security.protection import kind_of, protecting_versions, protection_message

__all__ = ["ReferencedByVersionsAdmin"]


class ReferencedByVersionsAdmin(admin.ModelAdmin):
    """A row a labelled version refers to shows as protected, naming the chains and versions;
    saving a row tells which chain drafts use it (their labels serve it once published)."""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        kind = kind_of(type(obj))
        chains = drafts_referring_to(kind.key, obj.slug) if kind is not None and change else []
        if chains:
            names = ", ".join(chain.slug for chain in chains)
            messages.info(
                request,
                f"The drafts of {names} use this {kind.label if kind else 'row'}. What their "
                "labels serve (production included) changes only when a new version is "
                "published and promoted.",
            )

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, Any]:
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        protected = list(protected)
        for obj in objs:
            versions = protecting_versions(obj)
            if versions:
                protected.append(protection_message(obj, versions))
        return deleted, counts, perms_needed, protected
