"""Call logs: one row per chain execution (completed, failed or cancelled), with its trace.

Rows hold no message text: the transcript lives in the conversation, and logs are kept longer
and read by more people (seed 003 §3.1: do not log raw prompts and answers).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from advisors_app.core.finish_reasons import FinishReasonCategory
from advisors_app.models.costs import PriceSource, cost_field

__all__ = ["CallLog"]


class CallLog(models.Model):
    """What one turn did: chain, user, conversation, outcome, timings, usage and trace."""

    class Status(models.TextChoices):
        OK = "ok", "Completed"
        ERROR = "error", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    class Mode(models.TextChoices):
        CALL = "call", "Call"
        STREAM = "stream", "Stream"

    chain = models.ForeignKey(
        "advisors_app.AdvisorChain",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="call_logs",
    )
    #: Kept when the chain is deleted.
    chain_slug = models.SlugField(max_length=100)
    #: The ``snapshot_hash`` of the version that ran.
    config_hash = models.CharField(max_length=64, blank=True)
    chain_version = models.ForeignKey(
        "advisors_app.ChainVersion",
        on_delete=models.RESTRICT,
        null=True,
        blank=True,
        related_name="call_logs",
    )
    #: The label the caller asked for: ``draft`` when the editable rows ran, empty when they
    #: named a version.
    label = models.CharField(max_length=50, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="advisor_call_logs",
    )
    #: The stored conversation id (``CONVERSATION_ID``), kept when the conversation is deleted.
    conversation_id = models.CharField(max_length=255, blank=True, db_index=True)
    trace_id = models.CharField(max_length=32, unique=True)
    mode = models.CharField(max_length=8, choices=Mode.choices)
    status = models.CharField(max_length=16, choices=Status.choices)
    latency = models.FloatField(help_text="Seconds from the start of the chain to its end.")
    time_to_first_token = models.FloatField(
        null=True, blank=True, help_text="Seconds to the first streamed text (streams only)."
    )
    usage = models.JSONField(default=dict, blank=True)
    #: What the turn's model calls cost (every round: tool rounds and validation retries);
    #: ``None`` when a round's price is unknown — never a silent zero.
    input_cost = cost_field(null=True, blank=True)
    output_cost = cost_field(null=True, blank=True)
    total_cost = cost_field(null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    price_source = models.CharField(max_length=16, choices=PriceSource.choices, blank=True)
    #: One entry per model call: ``model_config``, ``provider``, ``model``, token counts,
    #: costs as strings, ``price_source`` — what ``manage.py reprice`` recomputes from.
    cost_rounds = models.JSONField(default=list, blank=True)
    finish_reason = models.CharField(max_length=64, blank=True)
    #: The provider-neutral category of ``finish_reason`` (issue 43; blank: no reason).
    finish_category = models.CharField(
        max_length=20,
        blank=True,
        choices=[(c.value, c.value.replace("_", " ")) for c in FinishReasonCategory],
    )
    error_type = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    #: HTTP status the model provider answered with, for provider errors.
    provider_status = models.PositiveSmallIntegerField(null=True, blank=True)
    #: One entry per advisor invocation, in the order they started (see ``advisors_app.trace``).
    trace = models.JSONField(default=list, blank=True)
    #: The experiment that chose the version, and the arm it chose (issue 37; ``None``/blank:
    #: the label's own version served).
    experiment = models.ForeignKey(
        "advisors_app.Experiment",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="call_logs",
    )
    experiment_arm = models.CharField(max_length=100, blank=True)
    #: The turn's guard verdicts, in order: ``{"rail", "check", "action", "detail", "failed",
    #: "ms"}`` each (``advisors_app.core.advisors.guard.Verdict``).
    guard_verdicts = models.JSONField(default=list, blank=True)
    created = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created"]
        verbose_name = "call log"

    def __str__(self) -> str:
        return f"{self.chain_slug} {self.status} {self.created:%Y-%m-%d %H:%M:%S}"

    @property
    def total_tokens(self) -> int | None:
        return (self.usage or {}).get("total_tokens")
