"""Usage and spend reports: what turns used and cost, grouped, and where budgets stand.

Read by ``GET /api/usage/`` (:mod:`advisors_app.api.views.usage`) and the admin's spend report
(:mod:`advisors_app.admin.spend_report`); nothing here writes.

- :func:`usage_rows`: calls, tokens and cost of the call logs in a time range, grouped by local
  day, chain, user or model. Costs are summed exactly (``numeric`` in PostgreSQL, ``Decimal``
  here) **per currency** from each log's ``cost_rounds`` — one entry per model call, so a turn
  whose rounds ran on two models counts towards both. A round whose price is unknown adds no
  cost: its call is counted in ``unknown_cost_calls`` instead, never as zero. A call logged
  without rounds but with tokens (before costs were recorded) is unknown-priced too.
- :func:`budget_standings` / :func:`subject_standings`: a budget's spend in its current period,
  what is left and when it resets, from the budget counters
  (:mod:`advisors_app.costs.budgets`: a counter whose period ended holds nothing for the
  current one).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import connection
from django.db.models import Count, F, Q
from django.utils import timezone

from advisors_app.costs.budgets import counter_state, money, period_bounds
from advisors_app.models import AdvisorChain, Budget, BudgetCounter, CallLog

__all__ = [
    "API_GROUPINGS",
    "GROUPINGS",
    "BudgetStanding",
    "Standing",
    "UsageRow",
    "budget_standings",
    "budget_subject",
    "local_range",
    "subject_labels",
    "subject_standings",
    "total_row",
    "usage_rows",
]

#: What :func:`usage_rows` groups by: the local day, the chain's slug, the user's id, or the
#: model's configuration slug (its model name, else its provider, when it has none).
GROUPINGS = ("day", "chain", "user", "model")
#: The groupings ``GET /api/usage/`` offers (users see their own usage only: no ``user``).
API_GROUPINGS = ("day", "chain", "model")
_ZERO = Decimal(0)


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One group's usage. ``key`` is the day (``YYYY-MM-DD``), chain slug, user id (text;
    ``None`` for a deleted user) or model; for ``model``, ``None`` gathers the calls logged
    without their model rounds. ``cost`` maps a currency to the summed cost of the rounds whose
    price is known (free rounds add nothing); ``unknown_cost_calls`` counts the calls with a
    round of unknown price."""

    key: str | None
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: dict[str, Decimal] = field(default_factory=dict)
    unknown_cost_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The API's row: costs as plain decimal strings (``"0.0000125"``)."""
        return {
            "key": self.key,
            "calls": self.calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": {currency: money(amount) for currency, amount in sorted(self.cost.items())},
            "unknown_cost_calls": self.unknown_cost_calls,
        }


def local_range(first: date, last: date) -> tuple[datetime, datetime | None]:
    """From the start of day ``first`` to the end of day ``last`` (inclusive), in the current
    time zone: ``(start, end)`` with ``end`` exclusive, ``None`` for the last day there is.
    Raises ``OverflowError`` when ``first`` cannot be a moment in UTC (the year 1 east of it)."""
    zone = timezone.get_current_timezone()
    start = datetime.combine(first, time.min, tzinfo=zone).astimezone(UTC)
    try:
        following = last + timedelta(days=1)
    except OverflowError:
        return start, None
    end = datetime.combine(following, time.min, tzinfo=zone)
    try:
        return start, end.astimezone(UTC)
    except OverflowError:
        return start, None


def _number(expression: str) -> str:
    """SQL: the JSON value ``expression`` as ``numeric`` when it is a number, else 0."""
    return (
        f"CASE WHEN jsonb_typeof({expression}) = 'number' "
        f"THEN ({expression} #>> '{{}}')::numeric ELSE 0 END"
    )


#: A cost as ``money()`` writes it; anything else in a round is read as an unknown price.
_AMOUNT = r"'^-?[0-9]+(\.[0-9]*)?$'"

_CALL_KEYS = {
    "day": "to_char((l.created AT TIME ZONE %(zone)s)::date, 'YYYY-MM-DD')",
    "chain": "l.chain_slug",
    "user": "l.user_id::text",
    "model": "NULL::text",
}
_MODEL_KEY = "COALESCE(NULLIF(e->>'model_config', ''), NULLIF(e->>'model', ''), e->>'provider', '')"

# ``items``: one row per model round (its key, tokens, currency and cost, NULL when unknown),
# and one per call logged without rounds (cost 0 without tokens: no model was called; NULL
# with tokens: it was never priced). Grouped twice — per key for calls and tokens (a call
# counted once however many rounds), per key and currency for the costs.
_USAGE = """
WITH logs AS (
    SELECT l.id, l.usage, {call_key} AS call_key,
        CASE WHEN jsonb_typeof(l.cost_rounds) = 'array' THEN l.cost_rounds
             ELSE '[]'::jsonb END AS rounds
    FROM {table} l
    WHERE l.created >= %(start)s {where}
),
items AS (
    SELECT logs.id, {round_key} AS key,
        {round_prompt} AS prompt_tokens,
        {round_completion} AS completion_tokens,
        COALESCE(e->>'currency', '') AS currency,
        CASE WHEN e->>'input_cost' ~ {amount} AND e->>'output_cost' ~ {amount}
             THEN (e->>'input_cost')::numeric + (e->>'output_cost')::numeric END AS cost
    FROM logs CROSS JOIN LATERAL jsonb_array_elements(logs.rounds) AS e
    UNION ALL
    SELECT logs.id, logs.call_key,
        {usage_prompt}, {usage_completion}, '',
        CASE WHEN {usage_prompt} + {usage_completion} + {usage_total} = 0 THEN 0 END
    FROM logs WHERE jsonb_array_length(logs.rounds) = 0
)
SELECT key, currency, GROUPING(currency) = 1 AS whole,
    count(DISTINCT id), sum(prompt_tokens), sum(completion_tokens),
    count(DISTINCT id) FILTER (WHERE cost IS NULL), sum(cost)
FROM items
GROUP BY GROUPING SETS ((key), (key, currency))
"""


def usage_rows(
    group_by: str, start: datetime, end: datetime | None, user_id: int | None = None
) -> list[UsageRow]:
    """Blocking, one query: the usage of the call logs created in ``[start, end)`` (``end``
    ``None``: no upper bound), of user ``user_id`` only unless ``None``, grouped by
    ``group_by`` (one of :data:`GROUPINGS`; days are the current time zone's). Rows are sorted
    by key (days in order), ``None`` last; groups without calls are left out. Raises
    ``ValueError`` for another ``group_by``."""
    if group_by not in GROUPINGS:
        raise ValueError(f"Unknown grouping {group_by!r}; use one of {', '.join(GROUPINGS)}.")
    where = ""
    params: dict[str, Any] = {"start": start, "zone": timezone.get_current_timezone_name()}
    if end is not None:
        where += " AND l.created < %(end)s"
        params["end"] = end
    if user_id is not None:
        where += " AND l.user_id = %(user)s"
        params["user"] = user_id
    sql = _USAGE.format(
        table=connection.ops.quote_name(CallLog._meta.db_table),
        call_key=_CALL_KEYS[group_by],
        round_key=_MODEL_KEY if group_by == "model" else "logs.call_key",
        where=where,
        amount=_AMOUNT,
        round_prompt=_number("e->'prompt_tokens'"),
        round_completion=_number("e->'completion_tokens'"),
        usage_prompt=_number("logs.usage->'prompt_tokens'"),
        usage_completion=_number("logs.usage->'completion_tokens'"),
        usage_total=_number("logs.usage->'total_tokens'"),
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        found = cursor.fetchall()
    rows: dict[str | None, UsageRow] = {}
    costs: dict[str | None, dict[str, Decimal]] = {}
    for key, currency, whole, calls, prompt, completion, unknown, cost in found:
        if whole:
            rows[key] = UsageRow(key, calls, int(prompt or 0), int(completion or 0), {}, unknown)
        elif cost is not None and (currency or cost):
            # A free round has no currency and costs nothing: it adds no entry.
            costs.setdefault(key, {})[currency] = cost
    ordered = sorted(rows.values(), key=lambda r: (r.key is None, r.key or ""))
    return [
        UsageRow(
            r.key,
            r.calls,
            r.prompt_tokens,
            r.completion_tokens,
            costs.get(r.key, {}),
            r.unknown_cost_calls,
        )
        for r in ordered
    ]


def total_row(rows: Iterable[UsageRow], key: str | None = None) -> UsageRow:
    """The sum of ``rows`` that count each call once (``day``, ``chain`` or ``user`` rows; a
    call counts towards every ``model`` it used)."""
    calls = prompt = completion = unknown = 0
    cost: dict[str, Decimal] = {}
    for row in rows:
        calls += row.calls
        prompt += row.prompt_tokens
        completion += row.completion_tokens
        unknown += row.unknown_cost_calls
        for currency, amount in row.cost.items():
            cost[currency] = cost.get(currency, _ZERO) + amount
    return UsageRow(key, calls, prompt, completion, cost, unknown)


# -- budgets ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Standing:
    """One subject's spend in a budget's current period. ``remaining`` is
    ``limit - spent - reserved`` (negative when a ``warn`` budget ran over); ``reset_at``
    ``None``: a ``total`` budget never resets."""

    subject: str
    spent: Decimal
    reserved: Decimal
    remaining: Decimal
    reset_at: datetime | None


@dataclass(frozen=True, slots=True)
class BudgetStanding:
    """Where a budget stands now. A budget with one subject (a named user, group, tenant or
    chain, or everyone) has its ``single`` standing; one counting each user, tenant or chain
    separately has ``subjects`` (how many spent in this period) and ``tightest``, the one
    with the least left (``None`` when nobody spent yet)."""

    budget: Budget
    reset_at: datetime | None
    single: Standing | None = None
    subjects: int = 0
    tightest: Standing | None = None


def budget_subject(budget: Budget) -> str | None:
    """The one subject ``budget`` counts (as :func:`advisors_app.costs.budgets.applicable_budgets`
    names it: ``user:7``, ``group:2``, ``tenant:acme``, ``chain:3``, ``global``), or ``None``
    when it counts each user, tenant or chain separately."""
    scope = budget.scope
    if scope == Budget.Scope.USER:
        return f"user:{budget.user_id}" if budget.user_id else None
    if scope == Budget.Scope.GROUP:
        return f"group:{budget.group_id}" if budget.group_id else None
    if scope == Budget.Scope.TENANT:
        return f"tenant:{budget.tenant}" if budget.tenant else None
    if scope == Budget.Scope.CHAIN:
        return f"chain:{budget.chain_id}" if budget.chain_id else None
    return "global"


def _standing(
    budget: Budget, counter: BudgetCounter | None, subject: str, now: datetime | None
) -> Standing:
    start, end = period_bounds(budget.period, now)
    spent = reserved = _ZERO
    if counter is not None and counter.period_start >= start:
        spent, reserved = counter.spent, counter.reserved
    return Standing(subject, spent, reserved, budget.limit - spent - reserved, end)


def budget_standings(
    budgets: Sequence[Budget], now: datetime | None = None
) -> dict[int, BudgetStanding]:
    """Blocking, at most three queries: where each of ``budgets`` stands at ``now`` (default:
    now), by budget id."""
    singles = {b.pk: s for b in budgets if (s := budget_subject(b)) is not None}
    counters = counter_state(singles.items())
    each = [b for b in budgets if b.pk not in singles]
    subjects: dict[int, int] = {}
    tightest: dict[int, BudgetCounter] = {}
    if each:
        current = Q()
        for budget in each:
            start = period_bounds(budget.period, now)[0]
            current |= Q(budget_id=budget.pk, period_start__gte=start)
        in_period = BudgetCounter.objects.filter(current)
        subjects = dict(
            in_period.values("budget_id").annotate(n=Count("pk")).values_list("budget_id", "n")
        )
        # PostgreSQL's DISTINCT ON: each budget's counter with the most used.
        tightest = {
            c.budget_id: c
            for c in in_period.annotate(used=F("spent") + F("reserved"))
            .order_by("budget_id", "-used", "subject")
            .distinct("budget_id")
        }
    standings = {}
    for budget in budgets:
        _, end = period_bounds(budget.period, now)
        subject = singles.get(budget.pk)
        if subject is not None:
            counter = counters.get((budget.pk, subject))
            standing = _standing(budget, counter, subject, now)
            standings[budget.pk] = BudgetStanding(budget, end, single=standing)
            continue
        top = tightest.get(budget.pk)
        standings[budget.pk] = BudgetStanding(
            budget,
            end,
            subjects=subjects.get(budget.pk, 0),
            tightest=_standing(budget, top, top.subject, now) if top is not None else None,
        )
    return standings


def subject_standings(
    budget: Budget, now: datetime | None = None, limit: int | None = None
) -> list[Standing]:
    """Blocking, one query: the subjects that spent (or hold reservations) in ``budget``'s
    current period, the least left first; at most ``limit`` of them."""
    start, _ = period_bounds(budget.period, now)
    counters = (
        BudgetCounter.objects.filter(budget=budget, period_start__gte=start)
        .annotate(used=F("spent") + F("reserved"))
        .order_by("-used", "subject")
    )
    if limit is not None:
        counters = counters[:limit]
    return [_standing(budget, counter, counter.subject, now) for counter in counters]


def subject_labels(subjects: Iterable[str]) -> dict[str, str]:
    """Blocking, a query per kind present: people's names for budget subjects —
    ``user:7`` → ``user alice``, ``group:2`` → ``group staff``, ``chain:3`` → ``chain
    support``, ``tenant:acme`` → ``tenant acme``, ``global`` → ``everyone``. A subject whose
    row is gone keeps its id (``user 7 (deleted)``)."""
    ids: dict[str, set[int]] = {"user": set(), "group": set(), "chain": set()}
    subjects = list(subjects)
    for subject in subjects:
        kind, _, rest = subject.partition(":")
        if kind in ids and rest.isdigit():
            ids[kind].add(int(rest))
    names: dict[str, dict[int, str]] = {
        "user": {
            pk: str(name)
            for pk, name in get_user_model()
            .objects.filter(pk__in=ids["user"])
            .values_list("pk", get_user_model().USERNAME_FIELD)
        }
        if ids["user"]
        else {},
        "group": dict(Group.objects.filter(pk__in=ids["group"]).values_list("pk", "name"))
        if ids["group"]
        else {},
        "chain": dict(AdvisorChain.objects.filter(pk__in=ids["chain"]).values_list("pk", "slug"))
        if ids["chain"]
        else {},
    }
    labels = {}
    for subject in subjects:
        kind, _, rest = subject.partition(":")
        if subject == "global":
            labels[subject] = "everyone"
        elif kind in names and rest.isdigit():
            name = names[kind].get(int(rest))
            labels[subject] = f"{kind} {name}" if name is not None else f"{kind} {rest} (deleted)"
        else:
            labels[subject] = f"{kind} {rest}" if rest else subject
    return labels
