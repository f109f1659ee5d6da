"""Chain versions and labels: what a chain serves, as immutable snapshots and named pointers.

A chain's rows (:class:`~advisors_app.models.AdvisorChain` and its advisor rows) are the
editable *draft*. Publishing stores the draft's snapshot (:mod:`advisors_app.definition`) as a
:class:`ChainVersion`, numbered 1, 2, … per chain and never changed afterwards. A
:class:`ChainLabel` (``production``, ``staging``, …) points at one version; turns run the
version a label points at, ``production`` by default. Every move of a label appends a
:class:`ChainLabelEvent`, so the history says who served what, when and why.

A version stays while a label points at it or a conversation or call log refers to it: the
ORM refuses the delete (``RestrictedError``), and so do the admin and the API.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.core.validators import RegexValidator
from django.db import models

__all__ = ["PRODUCTION", "ChainLabel", "ChainLabelEvent", "ChainVersion", "ImmutableVersionError"]

#: The label every chain has, and the one callers get unless they name another.
PRODUCTION = "production"

#: ``draft`` is reserved: where a version may be named, it means the editable rows.
LABEL_NAME_VALIDATOR = RegexValidator(
    # \Z, not $: "$" also matches before a final newline.
    r"\A(?!draft\Z)[a-z][a-z0-9_-]{0,49}\Z",
    "Use 1 to 50 lower-case letters, digits, '-' and '_', starting with a letter "
    "(not 'draft', which names the editable rows).",
)


class ImmutableVersionError(ValueError):
    """Raised when code tries to change a stored :class:`ChainVersion`."""


class ChainVersion(models.Model):
    """One published state of a chain: its canonical snapshot and that snapshot's SHA-256."""

    chain = models.ForeignKey(
        "advisors_app.AdvisorChain", on_delete=models.CASCADE, related_name="versions"
    )
    number = models.PositiveIntegerField()
    snapshot = models.JSONField()
    snapshot_hash = models.CharField(max_length=64, db_index=True)
    #: ``"kind:slug"`` of every row the snapshot took content from (deletes of them are refused
    #: while a label points at this version).
    references = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    message = models.CharField(max_length=500, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    parent = models.ForeignKey(
        "self",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The version this one was restored from, if any.",
    )

    class Meta:
        ordering = ["chain", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["chain", "number"], name="chain_version_number")
        ]
        indexes = [GinIndex(fields=["references"], name="chain_version_references")]
        verbose_name = "chain version"

    def __str__(self) -> str:
        return f"v{self.number}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None and not self._state.adding:
            raise ImmutableVersionError(
                f"chain version v{self.number} is immutable; publish a new version instead"
            )
        super().save(*args, **kwargs)


class ChainLabel(models.Model):
    """A named pointer at one version of a chain (``production``, ``staging``, ``canary``)."""

    chain = models.ForeignKey(
        "advisors_app.AdvisorChain", on_delete=models.CASCADE, related_name="labels"
    )
    name = models.CharField(max_length=50, validators=[LABEL_NAME_VALIDATOR])
    version = models.ForeignKey(ChainVersion, on_delete=models.RESTRICT, related_name="labels")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["chain", "name"]
        constraints = [models.UniqueConstraint(fields=["chain", "name"], name="chain_label_name")]
        permissions = [("promote_production", "Can move the production label of a chain")]
        verbose_name = "chain label"

    def __str__(self) -> str:
        return f"{self.name} → v{self.version.number}"


class ChainLabelEvent(models.Model):
    """One move of a label: from which version to which, by whom, when and why."""

    label = models.ForeignKey(ChainLabel, on_delete=models.CASCADE, related_name="events")
    from_version = models.ForeignKey(
        ChainVersion, on_delete=models.RESTRICT, null=True, blank=True, related_name="+"
    )
    to_version = models.ForeignKey(ChainVersion, on_delete=models.RESTRICT, related_name="+")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    reason = models.CharField(max_length=500, blank=True)
    #: A roll back undoes the latest move not yet undone (the history works as a stack).
    rollback = models.BooleanField(default=False)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "label event"

    def __str__(self) -> str:
        before = f"v{self.from_version.number}" if self.from_version_id else "none"
        return f"{self.label.name}: {before} → v{self.to_version.number}"
