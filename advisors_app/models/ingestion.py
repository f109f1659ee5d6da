"""Ingestion jobs: uploads waiting for, or done by, a task worker.

An :class:`IngestionJob` is one upload (one or more files, or one JSON text) into one
collection. The request that accepts it stores the job, its files (:class:`IngestionFile`, the
bytes in PostgreSQL so a worker on any machine can read them) and a task of Django's tasks API
in one transaction, and answers 202; a worker (``manage.py db_worker``) reads, splits, embeds and
stores the chunks, writing the progress (``done`` of ``total`` chunks to embed) as it goes. The
files are deleted when the job ends; the job row stays as the record of what happened.
"""

from __future__ import annotations

import uuid
from typing import Any

from django.conf import settings
from django.db import models

from advisors_app.security.bidi import without_bidi_controls

__all__ = ["IngestionFile", "IngestionJob"]


class IngestionJob(models.Model):
    """One upload's ingestion: who, into which collection, its state, progress and outcome.

    ``created_by`` submitted it and alone sees it over the API; ``owner`` owns the chunks it
    stores (empty: shared). ``limits`` are the parsing limits and quotas in force when it was
    accepted (keys of :class:`advisors_app.ingestion.parsing.Limits`); ``errors`` is a list of
    ``{"source", "message"}`` (``source`` null for the job as a whole); ``documents`` one
    ``{"source", "chunks", "added", "unchanged", "removed"}`` per stored source.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    collection = models.ForeignKey(
        "advisors_app.Collection", on_delete=models.CASCADE, related_name="ingestion_jobs"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="advisor_ingestion_jobs",
        help_text="Who submitted it (empty: the ingest command).",
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        help_text="Owner of the chunks it stores (empty: shared).",
    )
    tenant = models.CharField(max_length=100, blank=True)
    metadata = models.JSONField(default=dict, blank=True, help_text="Added to every chunk.")
    options = models.JSONField(
        default=dict, blank=True, help_text="chunk_size, chunk_overlap, batch_size."
    )
    limits = models.JSONField(default=dict, blank=True)
    sources = models.JSONField(default=list, blank=True, help_text="The names of its files.")
    bytes = models.PositiveBigIntegerField(default=0, help_text="Size of its files.")
    status = models.CharField(
        max_length=8, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    done = models.PositiveIntegerField(default=0, help_text="Chunks embedded so far.")
    total = models.PositiveIntegerField(default=0, help_text="Chunks to embed (known once read).")
    errors = models.JSONField(default=list, blank=True)
    documents = models.JSONField(default=list, blank=True)
    cpu_seconds = models.FloatField(default=0.0)
    task_id = models.CharField(max_length=64, blank=True, help_text="The task's result id.")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["created_by", "created_at"], name="advisors_job_user")]

    def __str__(self) -> str:
        names = ", ".join(self.sources[:3]) + (" …" if len(self.sources) > 3 else "")
        # Shown as the admin's title, breadcrumb and heading: no override character turns them.
        return without_bidi_controls(f"{names or self.pk} → {self.collection.slug} ({self.status})")

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)

    def progress(self) -> dict[str, Any]:
        """The job as ``GET /api/ingestions/<id>/`` shows it."""
        return {
            "id": str(self.pk),
            "status": self.status,
            "done": self.done,
            "total": self.total,
            "errors": self.errors,
            "documents": self.documents,
        }


class IngestionFile(models.Model):
    """One file of a job, kept until the job ends. ``as_text``: read as plain text whatever
    its name (a JSON text upload), else by its name's suffix or its content type."""

    job = models.ForeignKey(IngestionJob, on_delete=models.CASCADE, related_name="files")
    position = models.PositiveIntegerField()
    name = models.CharField(max_length=500)
    content_type = models.CharField(max_length=200, blank=True)
    as_text = models.BooleanField(default=False)
    size = models.PositiveBigIntegerField()
    data = models.BinaryField()

    class Meta:
        ordering = ["job", "position"]
        constraints = [
            models.UniqueConstraint(fields=["job", "position"], name="advisors_job_file_position")
        ]

    def __str__(self) -> str:
        return self.name
