"""Evaluation datasets and runs (issue 22, "Evaluation").

A :class:`Dataset` is a named list of items; a :class:`DatasetItem` is one case under a stable
``key``: ``input`` (``{"message", "history"?, "params"?}``: what the turn is asked, the
conversation before it as ``[{"role": "user"|"assistant", "content"}]``, and the turn's params)
and ``expected`` (``{"output"?, "json"?, "documents"?: {<metadata key>: [accepted values]},
"tool_calls"?: [{"name", "arguments"?}]}``), with ``tags``.

Items are **versioned**: an edit never changes a row, it closes the current one (``valid_to``)
and adds a new one (``valid_from``) under the same key, so the dataset *as of* a time ``T`` —
the rows with ``valid_from <= T < valid_to`` (:func:`items_as_of`) — is what it was then, and
a run can be repeated on it. At most one row per key is current (``valid_to`` null).

An :class:`EvalRun` evaluates one chain version (asked by number, label or as the draft) on a
dataset as of a time with a list of evaluators (``[{"key", "params"}]``), the chat options
pinned on every item (``chat_options``: temperature 0 and a seed unless the run says
otherwise) and each item ``repeats`` times; each item's outcome, per repeat, is an
:class:`EvalResult` (output, retrieved documents, tool calls, scores, latency, usage, cost,
call log). Each score is also a :class:`~advisors_app.models.Score` row
(``source="evaluator"``, linked to the turn's call log), the one table of judgements; the
result keeps a compact copy for comparisons. See :mod:`advisors_app.evaluation.runs`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q, QuerySet
from django.utils import timezone

from advisors_app.validation import validate_json_value

__all__ = [
    "DEFAULT_GATE_MARGIN",
    "MAX_REPEATS",
    "Dataset",
    "DatasetItem",
    "EvalResult",
    "EvalRun",
    "PromotionGate",
    "items_as_of",
]

#: Most times a run may repeat each item (a run of a whole dataset ten times over is already
#: long on a small machine).
MAX_REPEATS = 20
#: The gate's default non-inferiority margin: the candidate passes when the lower bound of the
#: 95 % interval of its mean score difference is not below ``-margin`` (scores lie in [0, 1]:
#: 0.05 is five points of a pass rate).
DEFAULT_GATE_MARGIN = 0.05


class Dataset(models.Model):
    """A named, versioned list of evaluation items (see the module docstring)."""

    slug = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200, blank=True)
    description = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name or self.slug

    def current_items(self) -> QuerySet[DatasetItem]:
        """The items as they are now (each key's current version), by key."""
        return items_as_of(self)


class DatasetItem(models.Model):
    """One version of one item of a dataset: ``key``, ``input``, ``expected``, ``tags``, valid
    from ``valid_from`` until ``valid_to`` (null: the current version)."""

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="items")
    key = models.CharField(max_length=200)
    input = models.JSONField(validators=[validate_json_value])
    expected = models.JSONField(default=dict, blank=True, validators=[validate_json_value])
    tags = models.JSONField(default=list, blank=True)
    valid_from = models.DateTimeField(default=timezone.now, db_index=True)
    valid_to = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["dataset", "key", "valid_from"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "key"],
                condition=Q(valid_to__isnull=True),
                name="advisors_dataset_item_one_current",
            ),
            models.CheckConstraint(
                condition=Q(valid_to__isnull=True) | Q(valid_to__gt=models.F("valid_from")),
                name="advisors_dataset_item_valid_range",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dataset_id}:{self.key}"

    @property
    def message(self) -> str:
        """The item's input message ("" when missing)."""
        value = self.input.get("message") if isinstance(self.input, dict) else None
        return value if isinstance(value, str) else ""

    def content(self) -> dict[str, Any]:
        """What the import/export shape holds of this version (``key``, ``input``,
        ``expected``, ``tags``): an edit is a change of this."""
        return {"key": self.key, "input": self.input, "expected": self.expected, "tags": self.tags}


def items_as_of(dataset: Dataset | int, at: datetime | None = None) -> QuerySet[DatasetItem]:
    """The versions of ``dataset``'s items valid at ``at`` (``valid_from <= at < valid_to``;
    ``None``: now, the current versions), by key."""
    dataset_id = dataset if isinstance(dataset, int) else dataset.pk
    items = DatasetItem.objects.filter(dataset_id=dataset_id)
    if at is None:
        items = items.filter(valid_to__isnull=True)
    else:
        items = items.filter(valid_from__lte=at).filter(
            Q(valid_to__isnull=True) | Q(valid_to__gt=at)
        )
    return items.order_by("key")


class EvalRun(models.Model):
    """One evaluation of one chain version on a dataset as of a time (see the module
    docstring); ``done``/``total`` items so far, ``summary`` per evaluator once it ends."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="runs")
    #: The dataset's items as of this time are evaluated.
    as_of = models.DateTimeField(default=timezone.now)
    chain_slug = models.SlugField(max_length=100)
    #: What was asked: a label, a version number, ``"draft"``, or nothing (production).
    label = models.CharField(max_length=50, blank=True)
    version_asked = models.CharField(
        max_length=20, blank=True, help_text='A version number or "draft"; blank: by label.'
    )
    #: The version that ran (null: the draft, or the version was deleted since).
    chain_version = models.ForeignKey(
        "advisors_app.ChainVersion",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="eval_runs",
    )
    #: The chain version's number as it ran (null: the draft).
    version_number = models.PositiveIntegerField(null=True, blank=True)
    #: ``[{"key": <evaluator key>, "params": {...}}]``.
    evaluators = models.JSONField(default=list, blank=True)
    #: Chat options every item's turn gets where the item's own ``params.options`` do not set
    #: them (``create_run`` pins ``{"temperature": 0, "seed": 0}`` unless told otherwise; the
    #: seed grows by one per repeat). ``{}``: nothing pinned.
    chat_options = models.JSONField(default=dict, blank=True)
    #: Times each item is run; results are per (item, repeat).
    repeats = models.PositiveSmallIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(MAX_REPEATS)]
    )
    status = models.CharField(
        max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True
    )
    #: Turns run so far and in all (items × repeats).
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    #: ``{"items", "errors", "evaluators": {key: {"mean", "pass_rate", "scored", "passed"}}}``.
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [
            models.Index(
                fields=["dataset", "chain_slug", "-created_at"], name="advisors_evalrun_chain"
            )
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(repeats__gte=1) & Q(repeats__lte=MAX_REPEATS),
                name="advisors_evalrun_repeats_range",
            )
        ]

    def __str__(self) -> str:
        return f"Run {self.pk}: {self.chain_slug} {self.target_display()} on {self.dataset_id}"

    def target_display(self) -> str:
        """What ran, as a person reads it: ``v3 (staging)``, ``draft``, ``v1``."""
        if self.version_asked == "draft":
            return "draft"
        number = f"v{self.version_number}" if self.version_number is not None else "?"
        return f"{number} ({self.label})" if self.label else number

    @property
    def finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class EvalResult(models.Model):
    """One item's outcome in a run, per repeat: what the chain answered, retrieved and called,
    the scores, latency (ms), usage, cost and call log; ``error`` when the turn failed."""

    run = models.ForeignKey(EvalRun, on_delete=models.CASCADE, related_name="results")
    item = models.ForeignKey(
        DatasetItem, on_delete=models.SET_NULL, null=True, blank=True, related_name="results"
    )
    item_key = models.CharField(max_length=200)
    #: Which of the run's ``repeats`` this is (from 0).
    repeat = models.PositiveSmallIntegerField(default=0)
    output = models.TextField(blank=True)
    #: ``[{"id", "metadata", "score", "text"}]`` in rank order.
    documents = models.JSONField(default=list, blank=True)
    #: ``[{"name", "arguments"}]`` as the turn asked for them.
    tool_calls = models.JSONField(default=list, blank=True)
    #: ``{key: {"value", "passed", "comment"}}`` (copies of the run's ``Score`` rows).
    scores = models.JSONField(default=dict, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    usage = models.JSONField(null=True, blank=True)
    cost = models.JSONField(default=dict, blank=True)
    call_log = models.ForeignKey(
        "advisors_app.CallLog",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="eval_results",
    )
    trace_id = models.CharField(max_length=64, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "item_key", "repeat"]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "item_key", "repeat"], name="advisors_evalresult_once_per_repeat"
            )
        ]

    def __str__(self) -> str:
        again = f" (repeat {self.repeat})" if self.repeat else ""
        return f"{self.item_key}{again} in run {self.run_id}"


class PromotionGate(models.Model):
    """A chain's requirement that a label (``production`` by default) moves only to a version
    no worse than the one it serves on ``dataset`` (:mod:`advisors_app.evaluation.gate`): both
    versions need a finished, up-to-date run with these evaluators (blank: the defaults for
    the items), and for every score key the lower bound of the 95 % interval of the mean
    difference may not be below ``-margin``; when set, at most ``max_regressions`` items may
    regress and no score key's mean delta may be below ``min_delta``."""

    chain = models.OneToOneField(
        "advisors_app.AdvisorChain", on_delete=models.CASCADE, related_name="promotion_gate"
    )
    label = models.CharField(max_length=50, default="production")
    dataset = models.ForeignKey(Dataset, on_delete=models.PROTECT, related_name="gates")
    evaluators = models.JSONField(
        default=list,
        blank=True,
        help_text='[{"key", "params"}, ...]; blank: the defaults for the items.',
    )
    margin = models.FloatField(
        default=DEFAULT_GATE_MARGIN,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Non-inferiority margin: fails when the 95% interval's lower bound of a score "
        "key's mean difference (candidate − baseline) is below −margin.",
    )
    max_regressions = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Items that may regress (blank: not counted — single items flip by chance).",
    )
    min_delta = models.FloatField(
        null=True, blank=True, help_text="Lowest mean delta allowed per score key (e.g. -0.02)."
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.label} of {self.chain} gated by {self.dataset}"

    def clean(self) -> None:
        super().clean()
        from advisors_app.models.versions import LABEL_NAME_VALIDATOR

        try:
            LABEL_NAME_VALIDATOR(self.label)
        except ValidationError as exc:
            # A label no chain can have would gate nothing, silently.
            raise ValidationError({"label": exc.messages}) from None
