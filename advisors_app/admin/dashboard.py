"""The admin's dashboard (issue 24): ``/admin/advisors_app/advisorchain/dashboard/``, for staff
with ``advisors_app.view_calllog``.

Turns per day, latency (p50/p95) and time to first token, error and refusal rates, tokens and
cost, per day, per chain and per chain version, for a date range and optionally one chain: as
charts (Chart.js, vendored under ``static/advisors_app/vendor/chart.js/``) with the figures in
tables beside them. Everything is aggregated by PostgreSQL in one query (``GROUPING SETS``;
percentiles with ``percentile_cont``, which interpolates as Grafana and most dashboards do).

A refusal is a completed turn whose finish reason says a guard answered instead of the model
(``CONTENT_FILTER``: SafeGuardAdvisor; ``BUDGET_EXCEEDED``: BudgetGuardAdvisor). Latency counts
every turn (errors and cancellations too); time to first token exists for streams only.

Guard rails (issue 38): per rail, the turns a guard check blocked and the turns it flagged at
all (any action), with their rates over the range's turns (:func:`guard_rates`, read from the
call logs' ``guard_verdicts``; a second query).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db import connection
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from advisors_app.admin.spend_report import REPORT_MAX_DAYS, SpendReportForm
from advisors_app.core.advisors.budget_guard import BUDGET_EXCEEDED
from advisors_app.core.advisors.safe_guard import CONTENT_FILTER
from advisors_app.costs.reports import local_range
from advisors_app.models import AdvisorChain, CallLog, ChainVersion

__all__ = [
    "DASHBOARD_DAYS",
    "DASHBOARD_MAX_DAYS",
    "DashboardForm",
    "Figures",
    "dashboard",
    "dashboard_figures",
    "guard_rates",
]

#: The days the dashboard shows when not told: the last 14, today included.
DASHBOARD_DAYS = 14
#: The longest range it draws (one point per day): the spend report's.
DASHBOARD_MAX_DAYS = REPORT_MAX_DAYS
_ALL = ""


class DashboardForm(SpendReportForm):
    """The dashboard's filters: the spend report's date range (``?from=&to=``, inclusive local
    days, at most :data:`DASHBOARD_MAX_DAYS`) and ``chain`` (a slug; blank: every chain)."""

    def __init__(self, data: Any = None) -> None:
        super().__init__(data)
        slugs = AdvisorChain.objects.order_by("slug").values_list("slug", flat=True)
        self.fields["chain"] = forms.ChoiceField(
            label="Chain",
            required=False,
            choices=[(_ALL, "All chains"), *((slug, slug) for slug in slugs)],
        )


@dataclass(frozen=True)
class Figures:
    """One group's figures: turns, their outcomes, latency and time-to-first-token percentiles
    (seconds; ``None`` without data), tokens and cost (``None`` when no turn had a known
    price; ``currency`` ``"*"`` when several currencies were summed apart — see the spend
    report)."""

    turns: int
    errors: int
    cancelled: int
    refusals: int
    latency_p50: float | None
    latency_p95: float | None
    ttft_p50: float | None
    ttft_p95: float | None
    prompt_tokens: int
    completion_tokens: int
    cost: Decimal | None
    currency: str
    unknown_cost: int

    @property
    def error_rate(self) -> float:
        return self.errors / self.turns if self.turns else 0.0

    @property
    def refusal_rate(self) -> float:
        return self.refusals / self.turns if self.turns else 0.0


def _number(expression: str) -> str:
    """SQL: the JSON value ``expression`` as ``numeric`` when it is a number, else 0."""
    return (
        f"CASE WHEN jsonb_typeof({expression}) = 'number' "
        f"THEN ({expression} #>> '{{}}')::numeric ELSE 0 END"
    )


# One row per grouping set: the whole range, each day, each chain, each (chain, version).
# ``GROUPING(day, chain, version)`` tells them apart (a draft turn has a NULL version).
_FIGURES = """
WITH logs AS (
    SELECT to_char((l.created AT TIME ZONE %(zone)s)::date, 'YYYY-MM-DD') AS day,
        l.chain_slug AS chain, v.number AS version, l.status, l.latency,
        l.time_to_first_token AS ttft,
        upper(l.finish_reason) IN (%(content_filter)s, %(budget_exceeded)s) AS refused,
        {prompt} AS prompt_tokens, {completion} AS completion_tokens,
        l.total_cost, l.currency
    FROM {logs} l LEFT JOIN {versions} v ON v.id = l.chain_version_id
    WHERE l.created >= %(start)s {where}
)
SELECT GROUPING(day, chain, version), day, chain, version,
    count(*),
    count(*) FILTER (WHERE status = 'error'),
    count(*) FILTER (WHERE status = 'cancelled'),
    count(*) FILTER (WHERE refused),
    percentile_cont(0.5) WITHIN GROUP (ORDER BY latency),
    percentile_cont(0.95) WITHIN GROUP (ORDER BY latency),
    percentile_cont(0.5) WITHIN GROUP (ORDER BY ttft),
    percentile_cont(0.95) WITHIN GROUP (ORDER BY ttft),
    sum(prompt_tokens), sum(completion_tokens),
    sum(total_cost),
    count(DISTINCT NULLIF(currency, '')), max(currency),
    count(*) FILTER (WHERE total_cost IS NULL AND prompt_tokens + completion_tokens > 0)
FROM logs
GROUP BY GROUPING SETS ((), (day), (chain), (chain, version))
ORDER BY 1, 2, 3, 4 NULLS FIRST
"""
# ``GROUPING(day, chain, version)``: a bit set (day 4, chain 2, version 1) = not grouped by it.
_TOTAL, _BY_DAY, _BY_CHAIN, _BY_VERSION = 7, 3, 5, 4


def dashboard_figures(
    start: datetime, end: datetime | None, chain: str | None = None
) -> dict[str, Any]:
    """Blocking, one query: the figures of the call logs created in ``[start, end)`` (``end``
    ``None``: no upper bound), of chain slug ``chain`` only unless ``None``.

    Returns ``{"total": Figures | None, "days": {day: Figures}, "chains": {slug: Figures},
    "versions": {(slug, number or None for the draft): Figures}}``; days are ISO dates in the
    current time zone, groups without turns are left out.
    """
    where = ""
    params: dict[str, Any] = {
        "start": start,
        "zone": timezone.get_current_timezone_name(),
        "content_filter": CONTENT_FILTER,
        "budget_exceeded": BUDGET_EXCEEDED,
    }
    if end is not None:
        where += " AND l.created < %(end)s"
        params["end"] = end
    if chain is not None:
        where += " AND l.chain_slug = %(chain)s"
        params["chain"] = chain
    sql = _FIGURES.format(
        logs=connection.ops.quote_name(CallLog._meta.db_table),
        versions=connection.ops.quote_name(ChainVersion._meta.db_table),
        where=where,
        prompt=_number("l.usage->'prompt_tokens'"),
        completion=_number("l.usage->'completion_tokens'"),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    result: dict[str, Any] = {"total": None, "days": {}, "chains": {}, "versions": {}}
    for grouping, day, slug, version, *values in found:
        (turns, errors, cancelled, refusals, l50, l95, t50, t95, prompt, completion) = values[:10]
        cost, currencies, currency, unknown = values[10:]
        figures = Figures(
            turns=turns,
            errors=errors,
            cancelled=cancelled,
            refusals=refusals,
            latency_p50=l50,
            latency_p95=l95,
            ttft_p50=t50,
            ttft_p95=t95,
            prompt_tokens=int(prompt or 0),
            completion_tokens=int(completion or 0),
            cost=cost,
            currency="*" if currencies > 1 else currency or "",
            unknown_cost=unknown,
        )
        if grouping == _TOTAL:
            # The empty grouping set answers even without rows: no turns is no total.
            result["total"] = figures if turns else None
        elif grouping == _BY_DAY:
            result["days"][day] = figures
        elif grouping == _BY_CHAIN:
            result["chains"][slug] = figures
        elif grouping == _BY_VERSION:
            result["versions"][(slug, version)] = figures
    return result


# Per rail: the turns with a blocking verdict and the turns with any verdict on it.
_GUARD_RATES = """
SELECT v.value->>'rail',
    count(DISTINCT l.id) FILTER (WHERE v.value->>'action' = 'block'),
    count(DISTINCT l.id)
FROM {logs} l CROSS JOIN LATERAL jsonb_array_elements(
    CASE WHEN jsonb_typeof(l.guard_verdicts) = 'array' THEN l.guard_verdicts ELSE '[]' END
) v
WHERE l.created >= %(start)s {where}
GROUP BY 1 ORDER BY 1
"""


def guard_rates(
    start: datetime, end: datetime | None, chain: str | None = None
) -> dict[str, tuple[int, int]]:
    """Blocking, one query: rail → ``(turns blocked, turns flagged)`` over the call logs created
    in ``[start, end)`` (of chain ``chain`` only unless ``None``); rails without a verdict are
    left out."""
    where = ""
    params: dict[str, Any] = {"start": start}
    if end is not None:
        where += " AND l.created < %(end)s"
        params["end"] = end
    if chain is not None:
        where += " AND l.chain_slug = %(chain)s"
        params["chain"] = chain
    sql = _GUARD_RATES.format(logs=connection.ops.quote_name(CallLog._meta.db_table), where=where)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {str(rail): (blocked, flagged) for rail, blocked, flagged in cursor.fetchall()}


def _guard_rows(rates: dict[str, tuple[int, int]], turns: int) -> list[dict[str, Any]]:
    def rate(count: int) -> str:
        return f"{count / turns:.1%}" if turns else "-"

    return [
        {"rail": rail, "blocked": b, "block_rate": rate(b), "flagged": f, "flag_rate": rate(f)}
        for rail, (b, f) in rates.items()
    ]


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _cost(figures: Figures) -> str:
    if figures.cost is None:
        return "-"
    if figures.currency == "*":
        return "several currencies"
    return f"{figures.cost.normalize():f} {figures.currency}".strip()


def _row(name: str, figures: Figures, url: str = "") -> dict[str, Any]:
    """A table row: the figures as people read them."""
    return {
        "name": name,
        "url": url,
        "turns": figures.turns,
        "errors": figures.errors,
        "error_rate": f"{figures.error_rate:.1%}",
        "refusals": figures.refusals,
        "refusal_rate": f"{figures.refusal_rate:.1%}",
        "latency_p50": _seconds(figures.latency_p50),
        "latency_p95": _seconds(figures.latency_p95),
        "ttft_p50": _seconds(figures.ttft_p50),
        "ttft_p95": _seconds(figures.ttft_p95),
        "prompt_tokens": figures.prompt_tokens,
        "completion_tokens": figures.completion_tokens,
        "cost": _cost(figures),
        "unknown_cost": figures.unknown_cost,
    }


def _float(value: float | Decimal | None) -> float | None:
    return None if value is None else round(float(value), 6)


def _series(labels: list[str], figures: list[Figures | None]) -> dict[str, Any]:
    """Chart.js data (floats and counts: a drawing; the tables keep the figures)."""

    def column(get: Any) -> list[Any]:
        return [get(f) if f is not None else None for f in figures]

    return {
        "labels": labels,
        "turns": column(lambda f: f.turns - f.errors - f.cancelled - f.refusals),
        "refusals": column(lambda f: f.refusals),
        "errors": column(lambda f: f.errors),
        "cancelled": column(lambda f: f.cancelled),
        "error_rate": column(lambda f: round(f.error_rate * 100, 2)),
        "refusal_rate": column(lambda f: round(f.refusal_rate * 100, 2)),
        "latency_p50": column(lambda f: _float(f.latency_p50)),
        "latency_p95": column(lambda f: _float(f.latency_p95)),
        "ttft_p50": column(lambda f: _float(f.ttft_p50)),
        "ttft_p95": column(lambda f: _float(f.ttft_p95)),
        "prompt_tokens": column(lambda f: f.prompt_tokens),
        "completion_tokens": column(lambda f: f.completion_tokens),
        "cost": column(lambda f: _float(f.cost) if f.currency != "*" else None),
    }


def _version_name(version: int | None) -> str:
    return "draft" if version is None else f"v{version}"


def _figures_context(first: date, last: date, chain: str | None) -> dict[str, Any]:
    start, end = local_range(first, last)
    found = dashboard_figures(start, end, chain)
    days = [(first + timedelta(days=n)).isoformat() for n in range((last - first).days + 1)]
    by_day: dict[str, Figures] = found["days"]
    changelist = reverse("admin:advisors_app_calllog_changelist")
    versions = sorted(
        found["versions"].items(), key=lambda item: (item[0][0], item[0][1] is None, item[0][1])
    )
    version_labels = [f"{slug} {_version_name(number)}" for (slug, number), _ in versions]
    currencies = {f.currency for f in by_day.values() if f.cost is not None}
    turns = found["total"].turns if found["total"] else 0
    return {
        "guard_rows": _guard_rows(guard_rates(start, end, chain), turns),
        "first": first,
        "last": last,
        "total": found["total"],
        "total_row": _row("All", found["total"]) if found["total"] else None,
        "cost_currency": currencies.pop() if len(currencies) == 1 else "",
        "by_day": [_row(day, by_day[day]) for day in days if day in by_day],
        "by_chain": [
            _row(slug, figures, f"{changelist}?chain_slug__exact={slug}")
            for slug, figures in found["chains"].items()
        ],
        "by_version": [
            _row(label, figures)
            for label, (_, figures) in zip(version_labels, versions, strict=True)
        ],
        "charts": {
            "days": _series(days, [by_day.get(day) for day in days]),
            "versions": _series(version_labels, [figures for _, figures in versions]),
        },
    }


def _default_range() -> dict[str, str]:
    last = timezone.localdate()
    first = last - timedelta(days=DASHBOARD_DAYS - 1)
    return {"from": first.isoformat(), "to": last.isoformat()}


def dashboard(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """The dashboard page (``GET ?from=&to=&chain=``); staff with
    ``advisors_app.view_calllog`` only (the admin site has checked staff status)."""
    if not request.user.has_perm("advisors_app.view_calllog"):
        raise PermissionDenied
    data = request.GET if "from" in request.GET else {**_default_range(), **request.GET.dict()}
    form = DashboardForm(data)
    context: dict[str, Any] = {
        **model_admin.admin_site.each_context(request),
        "opts": CallLog._meta,
        "title": "Dashboard",
        "form": form,
        "calllogs_url": reverse("admin:advisors_app_calllog_changelist"),
        "report_url": reverse("admin:advisors_app_calllog_report"),
    }
    if form.is_valid():
        chain = form.cleaned_data["chain"] or None
        context["chain"] = chain
        context.update(_figures_context(form.cleaned_data["from"], form.cleaned_data["to"], chain))
    return TemplateResponse(request, "admin/advisors_app/dashboard.html", context)
