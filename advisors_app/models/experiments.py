"""Experiments (issue 37): a label of a chain serving several versions by percentage.

An :class:`Experiment` splits the turns of one label of a chain (``production`` by default)
between its :class:`ExperimentArm` rows, each a whole chain version with a weight in basis points
(the weights sum to 10,000; the first arm is the control). Assignment is a pure function of the
experiment's ``salt`` and the unit's key (:mod:`advisors_app.experiments.assignment`); a
conversation keeps the arm of its first turn. ``revision`` grows with every change of the
experiment or its arms: the turn's version read returns ``"<id>:<revision>"`` of the label's
active experiment, which names the in-process cached plan (nothing to invalidate, as for
compiled chains). An :class:`ExperimentEvent` records each change of status with who and why,
as :class:`~advisors_app.models.ChainLabelEvent` records label moves — a tripped guardrail's
pause among them.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.db import models
from django.db.models import F, Q

__all__ = ["BASIS_POINTS", "Experiment", "ExperimentArm", "ExperimentEvent"]

#: What the weights of an experiment's arms sum to (100 % in basis points).
BASIS_POINTS = 10_000


def _salt() -> str:
    return secrets.token_hex(8)


class Experiment(models.Model):
    """A split of ``label``'s turns of ``chain`` between arms (see the module docstring).

    ``guardrails``: ``[{"metric", "max"|"min"}]``, bounds on the difference arm − control
    (:data:`advisors_app.experiments.guardrails.METRICS`); ``targeting``: ordered rules
    ``[{"arm", "users"?|"groups"?|"param"?}]`` applied before the split; ``ramp``: the
    candidates' share step by step.
    """

    class Status(models.TextChoices):
        DRAFT = "draft", "Draft"
        RUNNING = "running", "Running"
        #: Every unit is served the control arm's version (by hand, or a tripped guardrail).
        PAUSED = "paused", "Paused"
        STOPPED = "stopped", "Stopped"
        CONCLUDED = "concluded", "Concluded"

    class Unit(models.TextChoices):
        USER = "user", "User"
        CONVERSATION = "conversation", "Conversation"
        #: The user's tenant (``ADVISORS["TENANT_RESOLVER"]``): a tenant's users share an arm.
        TENANT = "tenant", "Tenant"

    #: The statuses the turn's version read looks at: at most one per chain and label.
    ACTIVE = (Status.RUNNING, Status.PAUSED)

    chain = models.ForeignKey(
        "advisors_app.AdvisorChain", on_delete=models.CASCADE, related_name="experiments"
    )
    name = models.CharField(max_length=200)
    label = models.CharField(max_length=50, default="production")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.DRAFT)
    unit = models.CharField(max_length=16, choices=Unit.choices, default=Unit.USER)
    salt = models.CharField(max_length=64, default=_salt)
    guardrails = models.JSONField(default=list, blank=True)
    targeting = models.JSONField(default=list, blank=True)
    #: ``{"steps": [bp, ...], "min_turns": n}``: the share of units the candidate arms get
    #: together, step by step (``{}``: their weights from the start); see
    #: :mod:`advisors_app.experiments.ramps`.
    ramp = models.JSONField(default=dict, blank=True)
    ramp_step = models.PositiveSmallIntegerField(default=0)
    step_started_at = models.DateTimeField(null=True, blank=True)
    #: Grows with every change of the experiment or its arms (the turns' cache key).
    revision = models.PositiveIntegerField(default=1)
    #: The arm a conclusion chose (blank until concluded).
    winner = models.CharField(max_length=100, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["chain", "label"],
                condition=Q(status__in=["running", "paused"]),
                name="advisors_one_active_experiment_per_label",
            )
        ]
        indexes = [models.Index(fields=["chain", "label", "status"], name="advisors_exp_serving")]
        permissions = [
            ("run_experiment", "Can create, start, pause, stop and conclude experiments")
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.label}, {self.status})"

    def touch(self) -> None:
        """Bump ``revision`` in the database (every process re-reads the plan on its next
        turn); blocking, one statement."""
        Experiment.objects.filter(pk=self.pk).update(revision=F("revision") + 1)
        self.refresh_from_db(fields=["revision"])


class ExperimentArm(models.Model):
    """One arm: a version of the experiment's chain and its share of units in basis points.
    The arm at ``position`` 0 is the control."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="arms")
    name = models.SlugField(max_length=100)
    version = models.ForeignKey(
        "advisors_app.ChainVersion", on_delete=models.RESTRICT, related_name="experiment_arms"
    )
    weight = models.PositiveIntegerField(help_text="Basis points: the arms sum to 10000.")
    position = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["experiment", "position"]
        constraints = [
            models.UniqueConstraint(fields=["experiment", "name"], name="advisors_arm_name"),
            models.UniqueConstraint(fields=["experiment", "version"], name="advisors_arm_version"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.weight / 100:g} %)"

    @property
    def is_control(self) -> bool:
        return self.position == 0


class ExperimentEvent(models.Model):
    """One change of an experiment's status: from, to, by whom (``None``: a guardrail), when
    and why."""

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="events")
    from_status = models.CharField(max_length=16, blank=True)
    to_status = models.CharField(max_length=16)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    reason = models.CharField(max_length=500, blank=True)
    #: The guardrail check behind an automatic pause (metric, arms, statistic), else ``{}``.
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name = "experiment event"

    def __str__(self) -> str:
        return f"{self.experiment_id}: {self.from_status or 'new'} → {self.to_status}"
