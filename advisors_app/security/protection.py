"""Rows that a chain version in use took content from cannot be deleted.

A version holds its templates and word lists by content, so editing them never changes what a
label serves; but a version that still serves someone — a label points at it, or a
conversation is pinned to it — must never name a collection or model that is gone.
:func:`protecting_versions` lists those versions for a row; a ``pre_delete`` receiver raises
``ProtectedError`` naming them (the admin shows them on its delete page, the API answers 409).
Connected by ``AdvisorsAppConfig.ready()``.
"""

from __future__ import annotations

from typing import Any

from django.db.models import ProtectedError, Q
from django.db.models.signals import pre_delete

from advisors_app.definition.registry import ReferenceKind, reference_kinds
from advisors_app.models import ChainVersion, VersionPolicy

__all__ = ["connect", "kind_of", "protecting_versions", "protection_message"]


def kind_of(model: Any) -> ReferenceKind | None:
    """The reference kind whose rows are ``model``'s (``None``: not a reference kind)."""
    label = model._meta.label
    for kind in reference_kinds:
        if kind.model == label:
            return kind
    return None


def protecting_versions(instance: Any) -> list[ChainVersion]:
    """The versions in use (labelled, or with pinned conversations) whose snapshot refers to
    ``instance`` (none: ``[]``)."""
    kind = kind_of(type(instance))
    if kind is None or not getattr(instance, "slug", None):
        return []
    return list(
        ChainVersion.objects.filter(references__contains=[f"{kind.key}:{instance.slug}"])
        .filter(
            Q(labels__isnull=False)
            | Q(conversations__isnull=False, chain__version_policy=VersionPolicy.PIN)
        )
        .select_related("chain")
        .distinct()
        .order_by("chain__slug", "number")
    )


def protection_message(instance: Any, versions: list[ChainVersion]) -> str:
    """``Cannot delete template 'qa': chain 'support' v3 (production) refers to it.``"""
    kind = kind_of(type(instance))
    what = kind.label if kind else type(instance)._meta.verbose_name
    named = ", ".join(f"chain {v.chain.slug!r} v{v.number} ({_users(v)})" for v in versions)
    return (
        f"Cannot delete {what} {instance.slug!r}: {named} refer to it. Publish versions without "
        "it and move the labels first; pinned conversations keep their version until they "
        "are deleted or the chain follows its label."
    )


def _users(version: ChainVersion) -> str:
    labels = list(version.labels.values_list("name", flat=True))
    return ", ".join(labels) if labels else "conversations pinned to it"


def _refuse_referenced(sender: Any, instance: Any, **kwargs: Any) -> None:
    versions = protecting_versions(instance)
    if versions:
        raise ProtectedError(protection_message(instance, versions), set(versions))


def connect() -> None:
    """Connect the receiver (idempotent). No sender: other apps may register reference kinds."""
    pre_delete.connect(_refuse_referenced, dispatch_uid="advisors_refuse_referenced_delete")
