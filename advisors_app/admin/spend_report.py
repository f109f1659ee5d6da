"""The admin's spend report (issue 21): ``/admin/advisors_app/calllog/report/``, for staff with
``advisors_app.view_calllog``.

Spend by day as a chart (Chart.js, vendored under ``static/advisors_app/vendor/chart.js/``) and
tables by day, user, chain and model for a date range, with the calls of unknown price counted
apart, and where the budgets stand. The sums come from :mod:`advisors_app.costs.reports`, as
``GET /api/usage/``'s do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from advisors_app.admin.costs import amounts_text, budget_rows
from advisors_app.costs.reports import UsageRow, local_range, total_row, usage_rows
from advisors_app.models import Budget
from advisors_app.models.costs import PriceSource

__all__ = ["REPORT_DAYS", "REPORT_MAX_DAYS", "SpendReportForm", "spend_report"]

#: The days the spend report shows when not told: the last 30, today included.
REPORT_DAYS = 30
#: The longest range the report draws (one bar per day).
REPORT_MAX_DAYS = 366
_ZERO = Decimal(0)


class SpendReportForm(forms.Form):
    """The report's date range (``?from=&to=``, inclusive local days)."""

    def __init__(self, data: Any = None) -> None:
        super().__init__(data)
        widget = forms.DateInput(attrs={"type": "date"}, format="%Y-%m-%d")
        self.fields["from"] = forms.DateField(label="From", widget=widget)
        self.fields["to"] = forms.DateField(label="To", widget=widget)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        first, last = data.get("from"), data.get("to")
        if first is None or last is None:
            return data
        if first > last:
            raise ValidationError("From is after To.")
        if (last - first).days >= REPORT_MAX_DAYS:
            raise ValidationError(f"Choose at most {REPORT_MAX_DAYS} days.")
        try:
            local_range(first, last)
        except OverflowError:
            raise ValidationError(f"{first} is out of range.") from None
        return data


def _default_range() -> dict[str, str]:
    last = timezone.localdate()
    first = last - timedelta(days=REPORT_DAYS - 1)
    return {"from": first.isoformat(), "to": last.isoformat()}


def _sorted(rows: Iterable[UsageRow], currency: str | None) -> list[UsageRow]:
    """Most spent first (in the report's main currency), then most calls."""
    return sorted(
        rows,
        key=lambda r: (-(r.cost.get(currency, _ZERO) if currency else _ZERO), -r.calls),
    )


def _table(
    rows: list[UsageRow],
    names: dict[str | None, str],
    lookup: Callable[[str], str] | None = None,
) -> list[dict[str, Any]]:
    """Table rows; ``lookup(key)`` is the call-log list filter showing a row's calls."""
    changelist = reverse("admin:advisors_app_calllog_changelist")
    return [
        {
            "key": row.key,
            "name": names.get(row.key, row.key if row.key is not None else "-"),
            "url": f"{changelist}?{lookup(row.key)}" if lookup and row.key is not None else "",
            "calls": row.calls,
            "prompt_tokens": row.prompt_tokens,
            "completion_tokens": row.completion_tokens,
            # Nothing priced but calls of unknown price: no sum to show, not a zero.
            "cost": amounts_text(row.cost) if row.cost or not row.unknown_cost_calls else "-",
            "unknown": row.unknown_cost_calls,
        }
        for row in rows
    ]


def _day_filter(key: str) -> str:
    year, month, day = key.split("-")
    return urlencode(
        {"created__year": year, "created__month": int(month), "created__day": int(day)}
    )


def _chart(first: date, last: date, days: list[UsageRow]) -> dict[str, Any]:
    """Chart.js data: one label per day of the range, one dataset per currency (floats: a
    drawing, the tables keep the exact amounts)."""
    labels = [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]
    by_day = {row.key: row for row in days}
    currencies = sorted({c for row in days for c in row.cost})
    return {
        "labels": labels,
        "datasets": [
            {
                "label": currency,
                "data": [
                    float(by_day[day].cost.get(currency, _ZERO)) if day in by_day else 0
                    for day in labels
                ],
            }
            for currency in currencies
        ],
        "unknown": [by_day[day].unknown_cost_calls if day in by_day else 0 for day in labels],
    }


def _budget_rows(request: HttpRequest) -> list[dict[str, Any]] | None:
    """The budgets where they stand, enabled first; ``None`` for someone who may not view
    budgets."""
    if not (
        request.user.has_perm("advisors_app.view_budget")
        or request.user.has_perm("advisors_app.change_budget")
    ):
        return None
    return budget_rows(
        list(Budget.objects.select_related("user", "group", "chain").order_by("-enabled", "name"))
    )


def _user_names(rows: Iterable[UsageRow]) -> dict[str | None, str]:
    User = get_user_model()
    ids = [int(row.key) for row in rows if row.key is not None]
    found = User.objects.filter(pk__in=ids).values_list("pk", User.USERNAME_FIELD)
    names: dict[str | None, str] = {str(pk): str(name) for pk, name in found}
    names[None] = "(deleted user)"
    return names


def _report(first: date, last: date) -> dict[str, Any]:
    """The report's figures for the local days ``first`` to ``last``: four queries."""
    start, end = local_range(first, last)
    days = usage_rows("day", start, end)
    users = usage_rows("user", start, end)
    total = total_row(days)
    main = max(total.cost, key=lambda c: total.cost[c]) if total.cost else None
    unknown = {"price_source__exact": PriceSource.UNKNOWN.value, "created__gte": start.isoformat()}
    if end is not None:
        unknown["created__lt"] = end.isoformat()
    return {
        "first": first,
        "last": last,
        "unknown_query": urlencode(unknown),
        "total": total,
        "total_cost": amounts_text(total.cost),
        "chart": _chart(first, last, days),
        "by_day": _table(days, {}, _day_filter),
        "by_user": _table(
            _sorted(users, main),
            _user_names(users),
            lambda key: urlencode({"user__id__exact": key}),
        ),
        "by_chain": _table(
            _sorted(usage_rows("chain", start, end), main),
            {},
            lambda key: urlencode({"chain_slug__exact": key}),
        ),
        "by_model": _table(
            _sorted(usage_rows("model", start, end), main), {None: "(not recorded)"}
        ),
    }


def spend_report(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The spend report page (``GET ?from=&to=``); staff with ``advisors_app.view_calllog``
    only (the admin site has checked staff status)."""
    if not request.user.has_perm("advisors_app.view_calllog"):
        raise PermissionDenied
    form = SpendReportForm(request.GET if "from" in request.GET else _default_range())
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": "Spend report",
        "form": form,
        "budgets": _budget_rows(request),
        "prices_url": reverse("admin:advisors_app_modelprice_changelist"),
        "calllogs_url": reverse("admin:advisors_app_calllog_changelist"),
    }
    if form.is_valid():
        context.update(_report(form.cleaned_data["from"], form.cleaned_data["to"]))
    return TemplateResponse(request, "admin/advisors_app/spend_report.html", context)
