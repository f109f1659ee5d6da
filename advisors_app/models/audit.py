"""Audit entries written by ``AuditAdvisor`` through ``advisors_app.stores.audit``."""

from __future__ import annotations

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models

__all__ = ["AuditEntry"]


class AuditEntry(models.Model):
    """One call or stream as ``AuditAdvisor`` saw it (``advisors_app.core.advisors.audit``)."""

    class Mode(models.TextChoices):
        CALL = "call"
        STREAM = "stream"

    class Status(models.TextChoices):
        COMPLETED = "completed"
        ERROR = "error"
        INTERRUPTED = "interrupted"

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField()
    mode = models.CharField(max_length=8, choices=Mode.choices)
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    conversation_id = models.CharField(max_length=255, blank=True, db_index=True)
    request_text = models.TextField(blank=True)
    prompt = models.JSONField(default=list, encoder=DjangoJSONEncoder)
    response_text = models.TextField(null=True, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)
    usage = models.JSONField(null=True, blank=True, encoder=DjangoJSONEncoder)
    duration = models.FloatField(help_text="Seconds from the request to the end of the answer.")
    error = models.TextField(blank=True)
    context = models.JSONField(default=dict, encoder=DjangoJSONEncoder)

    class Meta:
        app_label = "advisors_app"
        ordering = ["-created_at", "-id"]
        verbose_name = "audit entry"
        verbose_name_plural = "audit entries"

    def __str__(self) -> str:
        return f"{self.mode} {self.status} at {self.started_at:%Y-%m-%d %H:%M:%S}"
