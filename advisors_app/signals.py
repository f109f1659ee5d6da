"""Keep every chain's ``config_hash`` current when anything its configuration depends on changes.

Connected by ``AdvisorsAppConfig.ready()``. Saving or deleting a chain or one of its advisor
rows refreshes that chain; saving or deleting a row of a reference kind (word list, template,
model configuration, collection, or a kind a third-party app registers) refreshes the chains
whose configuration refers to its slug — the old slug too, when it was renamed. Bulk
``QuerySet.update()`` sends no signals: call :func:`advisors_app.configuration.refresh_chain`
after one.
"""

from __future__ import annotations

from typing import Any

from django.db.models.signals import post_delete, post_save, pre_save

from advisors_app.configuration import chains_referring_to, refresh_chain, refresh_chains
from advisors_app.models import AdvisorChain, AdvisorConfig
from advisors_app.registry import ReferenceKind, reference_kinds

__all__ = ["connect"]


def _kind_of(sender: Any) -> ReferenceKind | None:
    label = sender._meta.label
    for kind in reference_kinds:
        if kind.model == label:
            return kind
    return None


def _chain_saved(sender: Any, instance: AdvisorChain, raw: bool = False, **kwargs: Any) -> None:
    if not raw:
        refresh_chain(instance)


def _advisor_changed(
    sender: Any, instance: AdvisorConfig, raw: bool = False, **kwargs: Any
) -> None:
    if not raw:
        refresh_chain(instance.chain_id)


def _reference_pre_save(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    if raw or instance.pk is None or _kind_of(sender) is None:
        return
    instance._advisors_old_slug = (
        sender._default_manager.filter(pk=instance.pk).values_list("slug", flat=True).first()
    )


def _reference_saved(sender: Any, instance: Any, raw: bool = False, **kwargs: Any) -> None:
    kind = _kind_of(sender)
    if raw or kind is None:
        return
    slugs = {instance.slug, getattr(instance, "_advisors_old_slug", None)}
    refresh_chains(chains_referring_to(kind.key, [s for s in slugs if s]))


def _reference_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    kind = _kind_of(sender)
    if kind is not None:
        refresh_chains(chains_referring_to(kind.key, [instance.slug]))


def connect() -> None:
    """Connect the receivers (idempotent: each has a ``dispatch_uid``)."""
    post_save.connect(_chain_saved, sender=AdvisorChain, dispatch_uid="advisors_chain_saved")
    post_save.connect(_advisor_changed, sender=AdvisorConfig, dispatch_uid="advisors_advisor_saved")
    post_delete.connect(
        _advisor_changed, sender=AdvisorConfig, dispatch_uid="advisors_advisor_deleted"
    )
    # No sender: reference kinds may be registered by other apps after this runs.
    pre_save.connect(_reference_pre_save, dispatch_uid="advisors_reference_pre_save")
    post_save.connect(_reference_saved, dispatch_uid="advisors_reference_saved")
    post_delete.connect(_reference_deleted, dispatch_uid="advisors_reference_deleted")
