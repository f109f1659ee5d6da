"""Admin of what calls cost (issue 21): model prices, budgets with where they stand, the cost
columns of call logs and chat models (the spend report is :mod:`advisors_app.admin.spend_report`).

- *Model prices* (:class:`ModelPriceAdmin`): an admin price for a configuration or a model-name
  pattern; the model's ``clean`` refuses both or neither.
- *Budgets* (:class:`BudgetAdmin`): each budget's remaining amount and reset date in the current
  period (a budget counting each user, tenant or chain: how many spent and the one with the
  least left), and on its page the spend of every subject in this period.
- :func:`cost_text` and :func:`cost_rounds_table` show a call log's cost; an unknown price is
  flagged, never shown as 0. :func:`price_status` says how a chat model's calls are priced.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from advisors_app.costs.budgets import money
from advisors_app.costs.pricing import ModelRef, price_book
from advisors_app.costs.reports import (
    BudgetStanding,
    Standing,
    budget_standings,
    subject_labels,
    subject_standings,
)
from advisors_app.models import Budget, CallLog, ChatModelConfig, ModelPrice
from advisors_app.models.costs import PriceSource

__all__ = [
    "BudgetAdmin",
    "ModelPriceAdmin",
    "amounts_text",
    "budget_rows",
    "cost_rounds_table",
    "cost_text",
    "price_status",
]

#: Subjects listed on a budget's page, the least left first.
COUNTERS_SHOWN = 100
_ZERO = Decimal(0)
_FLAG = '<span class="cost-unknown" style="color: var(--error-fg, #ba2121); font-weight: bold"'


def _unknown(title: str) -> str:
    return format_html(_FLAG + ' title="{}">unknown</span>', title)


def amounts_text(cost: dict[str, Decimal]) -> str:
    """``{"USD": 0.5, "EUR": 1}`` → ``1 EUR + 0.5 USD``; nothing known → ``0``."""
    parts = [f"{money(amount)} {currency}".strip() for currency, amount in sorted(cost.items())]
    return " + ".join(parts) or "0"


# -- call logs and chat models --------------------------------------------------------------


def _round_costs(rounds: Any) -> dict[str, Decimal] | None:
    """A log's rounds summed per currency (``None`` when a round's price is unknown)."""
    cost: dict[str, Decimal] = {}
    for entry in rounds if isinstance(rounds, list) else []:
        if not isinstance(entry, dict) or entry.get("input_cost") is None:
            return None
        try:
            amount = Decimal(entry["input_cost"]) + Decimal(entry.get("output_cost") or 0)
        except (ArithmeticError, TypeError, ValueError):
            return None
        currency = str(entry.get("currency") or "")
        if currency or amount:
            cost[currency] = cost.get(currency, _ZERO) + amount
    return cost


def cost_text(log: CallLog) -> str:
    """A call log's total cost with its currency; ``unknown`` (flagged) when a round's price
    is unknown or the turn was logged without its rounds but used tokens; ``-`` when no model
    was called."""
    if log.price_source == PriceSource.UNKNOWN:
        return _unknown("A model call of this turn has no price: add a model price, then reprice.")
    if log.total_cost is not None:
        if log.currency:
            return f"{money(log.total_cost)} {log.currency}"
        free = log.price_source == PriceSource.FREE
        return f"{money(log.total_cost)} (free)" if free else money(log.total_cost)
    if log.cost_rounds:
        cost = _round_costs(log.cost_rounds)
        return _unknown("A round's cost is unreadable.") if cost is None else amounts_text(cost)
    if (log.usage or {}).get("total_tokens"):
        return _unknown("Logged before costs were recorded.")
    return "-"


def cost_rounds_table(log: CallLog) -> str:
    """The model calls of a turn with their tokens and costs (``cost_rounds``)."""
    rounds = [r for r in log.cost_rounds or [] if isinstance(r, dict)]
    return render_to_string(
        "admin/advisors_app/cost_rounds.html",
        {"rounds": rounds, "total": cost_text(log), "source": log.get_price_source_display()},
    )


def price_status(config: ChatModelConfig) -> str:
    """How calls of ``config`` are priced now: the source and the input / output prices per
    million tokens, or ``unknown`` (flagged) when nothing prices them."""
    if config.pk is None:
        return "-"
    price = price_book().price_for(ModelRef.of(config.slug, config.to_config()))
    if price is None:
        return _unknown("No admin price, and genai-prices (auto) does not know this model.")
    if price.source == PriceSource.FREE:
        return "free"
    label = "admin price" if price.source == PriceSource.OVERRIDE else str(price.source)
    return format_html(
        '<span title="Per million tokens: input / output">{}: {} / {} {}</span>',
        label,
        money(price.input),
        money(price.output),
        price.currency,
    )


# -- model prices ---------------------------------------------------------------------------


@admin.register(ModelPrice)
class ModelPriceAdmin(admin.ModelAdmin):
    """Admin prices; they win over genai-prices for every pricing mode."""

    list_display = (
        "target",
        "valid_from",
        "input_per_million",
        "output_per_million",
        "cached_input_per_million",
        "currency",
        "note",
    )
    list_filter = ("currency", "chat_model")
    search_fields = ("model_pattern", "chat_model__slug", "note")
    list_select_related = ("chat_model",)
    date_hierarchy = "valid_from"
    fields = (
        "chat_model",
        "model_pattern",
        "valid_from",
        "input_per_million",
        "output_per_million",
        "cached_input_per_million",
        "currency",
        "note",
    )

    @admin.display(description="For", ordering="model_pattern")
    def target(self, obj: ModelPrice) -> str:
        if obj.chat_model_id:
            return format_html("chat model <strong>{}</strong>", obj.chat_model.slug)
        return format_html("models <code>{}</code>", obj.model_pattern)


# -- budgets --------------------------------------------------------------------------------


def _target(budget: Budget) -> str:
    scope = budget.scope
    if scope == Budget.Scope.GLOBAL:
        return "everyone"
    if scope == Budget.Scope.USER:
        return f"user {budget.user}" if budget.user_id else "each user"
    if scope == Budget.Scope.GROUP:
        return f"group {budget.group}" if budget.group_id else "group ?"
    if scope == Budget.Scope.TENANT:
        return f"tenant {budget.tenant}" if budget.tenant else "each tenant"
    return f"chain {budget.chain.slug}" if budget.chain_id else "each chain"


def _money_left(standing: Standing, currency: str) -> str:
    if standing.remaining < 0:
        return format_html(
            _FLAG + ">0</span> {} (over by {})", currency, money(-standing.remaining)
        )
    return f"{money(standing.remaining)} {currency}"


def _reset(when: Any) -> str:
    if when is None:
        return "never"
    return timezone.localtime(when).strftime("%Y-%m-%d %H:%M")


def _remaining(standing: BudgetStanding, labels: dict[str, str]) -> str:
    budget = standing.budget
    if standing.single is not None:
        return _money_left(standing.single, budget.currency)
    if standing.tightest is None:
        return f"{money(budget.limit)} {budget.currency} each (nobody spent yet)"
    subject = labels.get(standing.tightest.subject, standing.tightest.subject)
    return format_html(
        "{} spent; least left: {} ({})",
        f"{standing.subjects} {'subject' if standing.subjects == 1 else 'subjects'}",
        _money_left(standing.tightest, budget.currency),
        subject,
    )


def _standings(budgets: list[Budget]) -> tuple[dict[int, BudgetStanding], dict[str, str]]:
    standings = budget_standings(budgets)
    subjects = [s.tightest.subject for s in standings.values() if s.tightest is not None]
    return standings, subject_labels(subjects)


class BudgetForm(forms.ModelForm):
    class Meta:
        model = Budget
        fields = "__all__"
        widgets = {"tenant": forms.TextInput(attrs={"placeholder": "blank: each tenant"})}


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    """Budgets with their remaining amount and reset date; errors of ``Budget.clean`` on the
    form (a target for another scope, a downgrade without its model, ...)."""

    form = BudgetForm
    list_display = (
        "name",
        "enabled",
        "target",
        "period",
        "limit_text",
        "action_text",
        "remaining",
        "resets",
    )
    list_filter = ("enabled", "scope", "period", "action")
    search_fields = ("name", "tenant", "user__username", "chain__slug", "group__name")
    list_select_related = ("user", "group", "chain", "downgrade_to")
    raw_id_fields = ("user",)
    readonly_fields = ("this_period",)
    fieldsets = (
        (None, {"fields": ("name", "enabled")}),
        (
            "Who it counts",
            {
                "fields": ("scope", "user", "group", "tenant", "chain"),
                "description": "Leave user, tenant or chain blank to count each one separately.",
            },
        ),
        (
            "Limit",
            {
                "fields": (
                    "period",
                    "limit",
                    "currency",
                    "soft_limit_percent",
                    "action",
                    "downgrade_to",
                )
            },
        ),
        ("This period", {"fields": ("this_period",)}),
    )

    def get_changelist_instance(self, request: HttpRequest) -> Any:
        """The page's budgets with their standings attached (three queries for the page)."""
        changelist = super().get_changelist_instance(request)
        page = list(changelist.result_list)
        standings, labels = _standings(page)
        for budget in page:
            budget._standing = (standings[budget.pk], labels)
        return changelist

    def _standing_of(self, obj: Budget) -> tuple[BudgetStanding, dict[str, str]]:
        found = getattr(obj, "_standing", None)
        if found is None:
            standings, labels = _standings([obj])
            found = obj._standing = (standings[obj.pk], labels)
        return found  # type: ignore[no-any-return]

    @admin.display(description="Counts", ordering="scope")
    def target(self, obj: Budget) -> str:
        return _target(obj)

    @admin.display(description="Limit", ordering="limit")
    def limit_text(self, obj: Budget) -> str:
        return f"{money(obj.limit)} {obj.currency}"

    @admin.display(description="Action", ordering="action")
    def action_text(self, obj: Budget) -> str:
        if obj.action == Budget.Action.DOWNGRADE and obj.downgrade_to_id:
            return f"downgrade to {obj.downgrade_to.slug}"
        return str(obj.action)

    @admin.display(description="Remaining this period")
    def remaining(self, obj: Budget) -> str:
        standing, labels = self._standing_of(obj)
        return _remaining(standing, labels)

    @admin.display(description="Resets")
    def resets(self, obj: Budget) -> str:
        return _reset(self._standing_of(obj)[0].reset_at)

    @admin.display(description="Spend this period")
    def this_period(self, obj: Budget) -> str:
        """Every subject's spend, reservations, remaining amount and reset in the current
        period (the least left first; at most :data:`COUNTERS_SHOWN`)."""
        if obj.pk is None:
            return "-"
        standing, _ = self._standing_of(obj)
        rows = [standing.single] if standing.single is not None else []
        if standing.single is None:
            rows = subject_standings(obj, limit=COUNTERS_SHOWN)
        labels = subject_labels(row.subject for row in rows)
        return render_to_string(
            "admin/advisors_app/budget_standings.html",
            {
                "rows": [
                    {
                        "subject": labels.get(row.subject, row.subject),
                        "spent": money(row.spent),
                        "reserved": money(row.reserved),
                        "remaining": _money_left(row, obj.currency),
                    }
                    for row in rows
                ],
                "currency": obj.currency,
                "reset": _reset(standing.reset_at),
                "more": max(standing.subjects - len(rows), 0) if standing.single is None else 0,
            },
        )


def budget_rows(budgets: list[Budget]) -> list[dict[str, Any]]:
    """Each budget where it stands, for a table: link, target, limit, remaining, reset."""
    standings, labels = _standings(budgets)
    return [
        {
            "budget": budget,
            "url": reverse("admin:advisors_app_budget_change", args=[budget.pk]),
            "target": _target(budget),
            "limit": f"{money(budget.limit)} {budget.currency} per {budget.period}",
            "remaining": _remaining(standings[budget.pk], labels),
            "reset": _reset(standings[budget.pk].reset_at),
        }
        for budget in budgets
    ]
