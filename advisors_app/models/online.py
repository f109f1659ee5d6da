"""Online evaluation rules (issue 39): score a sample of a chain's live turns with the
evaluators of the registry, on the task queue, after each sampled turn committed.

See :mod:`advisors_app.online` for the hook, the task and the judge's budget.
"""

from __future__ import annotations

from decimal import Decimal

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

__all__ = ["OnlineEvaluation"]


class OnlineEvaluation(models.Model):
    """One rule: which turns of ``chain`` (its ``label``, optionally one experiment arm, the
    ``filters``) are sampled at ``sample_rate``, and the ``evaluators`` run on them."""

    chain = models.ForeignKey(
        "advisors_app.AdvisorChain", on_delete=models.CASCADE, related_name="online_evaluations"
    )
    label = models.CharField(max_length=50, default="production")
    #: Only the turns of this experiment arm (blank: every turn of the label).
    arm = models.CharField(max_length=100, blank=True)
    sample_rate = models.FloatField(
        default=0.1,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Share of the turns judged, 0 to 1.",
    )
    #: ``{"outcome": ["complete", "error"], "groups": ["staff"], "params": {"lang": "en"}}``:
    #: every given filter must match (see :func:`advisors_app.online.sampling.matches`).
    filters = models.JSONField(default=dict, blank=True)
    #: ``[{"key": "contains", "params": {...}}]``: entries of the evaluator registry, as an
    #: evaluation run lists them.
    evaluators = models.JSONField(default=list)
    judge_model = models.ForeignKey(
        "advisors_app.ChatModelConfig",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        help_text="The model llm_judge asks (unless its params name one).",
    )
    budget_usd = models.DecimalField(
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text="What the judge may spend in all (blank: no limit).",
    )
    spent_usd = models.DecimalField(max_digits=12, decimal_places=6, default=Decimal(0))
    enabled = models.BooleanField(default=True)
    #: Why judging stopped (``"budget used up"``); blank while it goes on.
    stopped_reason = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["chain", "label", "pk"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(sample_rate__gte=0.0) & models.Q(sample_rate__lte=1.0),
                name="advisors_online_sample_rate_0_1",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.chain} @ {self.label}: {self.sample_rate:g}"

    @property
    def budget_used_up(self) -> bool:
        return self.budget_usd is not None and self.spent_usd >= self.budget_usd
