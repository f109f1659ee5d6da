"""What model calls cost, and budgets that cap it.

- :class:`ModelPrice`: an admin's price for a chat-model configuration or for model names
  matching a pattern, from a date; it always wins over the packaged ``genai-prices`` data
  (:mod:`advisors_app.costs.pricing`).
- :class:`Budget`: a spending limit for a scope (a user or each user, a group, a tenant or each
  tenant, a chain or each chain, everything) and a period, with a soft limit and what happens
  when it is reached (block, downgrade to a cheaper model, or only warn).
- :class:`BudgetReservation`: what one running turn holds reserved on one counter, so that the
  reservation of a turn whose process died can be released (:mod:`advisors_app.turn.recovery`).
- :class:`BudgetCounter`: one budget's spend for one subject (``user:7``, ``chain:3``, ...) in
  its current period: what was spent and what running calls have reserved. Reservations are
  one conditional upsert each (:mod:`advisors_app.costs.reservations`), so parallel calls
  cannot pass a limit together.

Money is ``Decimal`` throughout: prices per million tokens, costs to 10 decimal places.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

__all__ = [
    "Budget",
    "BudgetCounter",
    "BudgetReservation",
    "ModelPrice",
    "PriceSource",
    "cost_field",
]

currency_code = RegexValidator(r"^[A-Z]{3}$", "Enter a three-letter ISO 4217 code, e.g. USD.")


def cost_field(**kwargs: object) -> models.DecimalField:
    """A money amount: up to 10 digits before the point and 10 after (a token at $0.05 per
    million tokens costs 0.00000005)."""
    return models.DecimalField(max_digits=20, decimal_places=10, **kwargs)  # type: ignore[arg-type]


class PriceSource(models.TextChoices):
    """Where a call's price came from; ``unknown`` is never counted as zero."""

    OVERRIDE = "override", "Admin price (ModelPrice)"
    PACKAGE = "genai-prices", "genai-prices data"
    FREE = "free", "Free (pricing mode)"
    UNKNOWN = "unknown", "Unknown price"
    #: A turn whose rounds were priced from different sources.
    MIXED = "mixed", "Several sources"


class ModelPrice(models.Model):
    """A price per million tokens, for one chat-model configuration or for model names
    matching ``model_pattern`` (shell-style: ``gpt-4o*``), valid from ``valid_from``.

    For a call, the newest row already valid at the call's time wins; a row for the
    configuration beats a pattern, and a longer pattern beats a shorter one.
    """

    chat_model = models.ForeignKey(
        "advisors_app.ChatModelConfig",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="prices",
        help_text="The configuration it is for (or a model-name pattern).",
    )
    model_pattern = models.CharField(
        max_length=200,
        blank=True,
        help_text="Model names, shell-style: gpt-4o* (or a configuration).",
    )
    valid_from = models.DateTimeField(default=timezone.now)
    input_per_million = cost_field(validators=[MinValueValidator(Decimal(0))])
    output_per_million = cost_field(validators=[MinValueValidator(Decimal(0))])
    cached_input_per_million = cost_field(
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal(0))],
        help_text="Price of cached prompt tokens (blank: the input price).",
    )
    currency = models.CharField(max_length=3, default="USD", validators=[currency_code])
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-valid_from", "-pk"]
        verbose_name = "model price"

    def __str__(self) -> str:
        target = self.chat_model.slug if self.chat_model_id else self.model_pattern
        return f"{target}: {self.input_per_million}/{self.output_per_million} {self.currency}"

    def clean(self) -> None:
        super().clean()
        if bool(self.chat_model_id) == bool(self.model_pattern.strip()):
            message = "Give either a chat-model configuration or a model-name pattern."
            raise ValidationError({"model_pattern": message})


class Budget(models.Model):
    """A spending limit for a scope and a period.

    ``user`` / ``tenant`` / ``chain`` scopes with their target left blank count each user,
    tenant or chain separately ("a daily budget per user"); with a target, that one only.
    A ``group`` budget is shared by the group's members; ``global`` by everyone.
    """

    class Scope(models.TextChoices):
        USER = "user", "User (blank: each user)"
        GROUP = "group", "Group (its members together)"
        TENANT = "tenant", "Tenant (blank: each tenant)"
        CHAIN = "chain", "Chain (blank: each chain)"
        GLOBAL = "global", "Everything"

    class Period(models.TextChoices):
        DAY = "day", "Day"
        WEEK = "week", "Week (from Monday)"
        MONTH = "month", "Month"
        TOTAL = "total", "Total (never resets)"

    class Action(models.TextChoices):
        BLOCK = "block", "Refuse the call"
        DOWNGRADE = "downgrade", "Switch to a cheaper model"
        WARN = "warn", "Warn only"

    name = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.USER)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="advisor_budgets",
    )
    group = models.ForeignKey(
        "auth.Group", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    tenant = models.CharField(max_length=200, blank=True)
    chain = models.ForeignKey(
        "advisors_app.AdvisorChain",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="budgets",
    )
    period = models.CharField(max_length=8, choices=Period.choices, default=Period.DAY)
    limit = cost_field(validators=[MinValueValidator(Decimal(0))])
    currency = models.CharField(max_length=3, default="USD", validators=[currency_code])
    soft_limit_percent = models.PositiveSmallIntegerField(
        null=True,
        blank=True,
        default=80,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Warn (event, signal) past this share of the limit.",
    )
    action = models.CharField(max_length=10, choices=Action.choices, default=Action.BLOCK)
    downgrade_to = models.ForeignKey(
        "advisors_app.ChatModelConfig",
        on_delete=models.PROTECT,
        null=True,
        blank=True,
        related_name="+",
        help_text="The cheaper chat model used once the limit is reached.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        super().clean()
        errors: dict[str, str] = {}
        targets = {"user": self.user_id, "group": self.group_id, "chain": self.chain_id}
        targets["tenant"] = self.tenant.strip() or None
        for name, value in targets.items():
            if value and name != self.scope:
                errors[name] = f"Only a {name} budget names a {name}."
        if self.scope == self.Scope.GROUP and not self.group_id:
            errors["group"] = "A group budget names its group."
        if self.scope == self.Scope.TENANT:
            from advisors_app.conf import app_settings

            if not app_settings.TENANT_RESOLVER:
                errors["scope"] = (
                    "No tenant resolver is configured (ADVISORS['TENANT_RESOLVER']): a tenant "
                    "budget would never apply."
                )
        if self.action == self.Action.DOWNGRADE and not self.downgrade_to_id:
            errors["downgrade_to"] = "A downgrade budget names the cheaper chat model."
        if self.action != self.Action.DOWNGRADE and self.downgrade_to_id:
            errors["downgrade_to"] = "Only a downgrade budget switches models."
        if errors:
            raise ValidationError(errors)


class BudgetCounter(models.Model):
    """A budget's spend for one subject in the period starting at ``period_start``."""

    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="counters")
    #: Who the spend is for: ``user:<pk>``, ``group:<pk>``, ``tenant:<name>``,
    #: ``chain:<pk>`` or ``global``.
    subject = models.CharField(max_length=255)
    period_start = models.DateTimeField()
    spent = cost_field(default=Decimal(0))
    #: Worst-case costs of calls running now, released as they settle.
    reserved = cost_field(default=Decimal(0))
    #: The period in which the limit was reached (downgrade holds for the rest of it).
    tripped_period = models.DateTimeField(null=True, blank=True)
    #: The period whose soft-limit signal has been sent (once per period).
    warned_period = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["budget", "subject"], name="budget_counter_subject")
        ]

    def __str__(self) -> str:
        return f"{self.budget} / {self.subject}"


class BudgetReservation(models.Model):
    """What one running turn (``turn``: its trace id) holds reserved on one budget counter:
    written with the reservation, removed when the turn settles. One left behind is a turn
    whose process died: :mod:`advisors_app.turn.recovery` releases it (``owner`` is the
    ``"<host>:<pid>"`` that ran the turn, ``updated_at`` its last reservation)."""

    turn = models.CharField(max_length=64)
    budget = models.ForeignKey(Budget, on_delete=models.CASCADE, related_name="+")
    subject = models.CharField(max_length=255)
    #: The counter's period when reserved: a counter rolled into a new one since holds none.
    period_start = models.DateTimeField()
    amount = cost_field(default=Decimal(0))
    owner = models.CharField(max_length=300)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["turn", "budget"], name="budget_reservation_turn")
        ]

    def __str__(self) -> str:
        return f"{self.turn} / {self.budget_id}: {self.amount}"
