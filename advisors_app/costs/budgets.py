"""Budgets: which apply to a turn, the check before it runs, and the warnings.

A turn is held to every enabled budget that counts it (:func:`applicable_budgets`). Before it
runs, :func:`precheck` refuses it when a ``block`` budget cannot take even its cheapest first
call; before each model call it then reserves the call's worst case on all of them, and books
what each call cost when it ends (:mod:`advisors_app.costs.reservations`).

- ``block`` budgets refuse the call (:class:`~advisors_app.core.exceptions.BudgetExceededError`
  with the period's reset time);
- ``downgrade`` budgets switch the turn to their cheaper chat model for the rest of the period
  (the counter remembers the period it was reached in);
- ``warn`` budgets never refuse.
Any budget past its soft limit (or a ``warn`` budget past its limit) adds a warning to the turn;
the first time in a period it is also sent as the :data:`budget_warning` signal.

Each process keeps the list of enabled budgets (:func:`applicable_budgets`), but what holds a
turn to a budget is read from the budget's row by the statements that check and reserve: its
limit, whether it is still enabled, whether it still exists. A budget deleted, disabled or
given another limit in any process (admin, shell, another server) is therefore seen by the
next check or model call of every turn it covers; a deleted or disabled one is skipped (and
logged), never a failure. Seeing such a change drops this process's list, and a caller that
reads the budgets' :func:`budgets_stamp` in a query it runs anyway (as the chain label is read
with the version) has the list read again as soon as any budget row changed anywhere — the
way a new budget is seen at once.

Spend in another currency than the budget's is not counted against it (logged); a call whose
price is unknown reserves nothing (its cost is flagged unknown in the call log).
A reservation left by a process that died is dropped when the counter's period rolls over.
"""

from __future__ import annotations

import calendar
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models.expressions import RawSQL
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal
from django.utils import timezone

from advisors_app.core.exceptions import BudgetExceededError
from advisors_app.models import Budget, BudgetCounter

__all__ = [
    "MAX_AMOUNT",
    "ApplicableBudget",
    "BudgetWarning",
    "applicable_budgets",
    "budget_warning",
    "budgets_stamp",
    "clamp",
    "clear_budget_cache",
    "counter_state",
    "money",
    "period_bounds",
    "precheck",
    "refusal",
    "warnings_for",
]

_ZERO = Decimal(0)

#: Sent once per budget, subject and period when spend passes the soft limit (or a ``warn``
#: budget's limit): ``sender=Budget``, ``budget``, ``subject``, ``spent`` (spent + reserved),
#: ``limit``, ``currency``, ``reset_at``, ``user`` (whose call crossed it).
budget_warning = Signal()

#: How long a process keeps the list of enabled budgets at most (dropped at once on a change
#: here, or one a turn finds; see the module docstring).
CACHE_SECONDS = 5.0


def money(amount: Decimal) -> str:
    """``amount`` as a plain decimal string without trailing zeros: ``0.00001``, ``12.5``."""
    text = format(amount, "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def period_bounds(period: str, now: datetime | None = None) -> tuple[datetime, datetime | None]:
    """The start and end of the ``period`` containing ``now``, in the current time zone
    (``total``: the epoch and ``None``, it never resets)."""
    now = timezone.localtime(now or timezone.now())
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == Budget.Period.DAY:
        return midnight, midnight + timedelta(days=1)
    if period == Budget.Period.WEEK:
        start = midnight - timedelta(days=midnight.weekday())
        return start, start + timedelta(days=7)
    if period == Budget.Period.MONTH:
        start = midnight.replace(day=1)
        days = calendar.monthrange(start.year, start.month)[1]
        return start, start + timedelta(days=days)
    return datetime(1970, 1, 1, tzinfo=timezone.get_current_timezone()), None


@dataclass(frozen=True, slots=True)
class ApplicableBudget:
    """A budget as it applies to one turn: for which ``subject`` it counts."""

    id: int
    name: str
    subject: str
    period: str
    limit: Decimal
    currency: str
    soft_limit_percent: int | None
    action: str
    #: The configuration a downgrade switches to: ``(slug, to_config())``.
    downgrade_to: tuple[str, dict[str, Any]] | None = None
    #: The version of the budget's row this was read from (PostgreSQL's ``xmin``: it changes
    #: with every update of the row, whoever makes it).
    version: str = ""

    @property
    def soft_limit(self) -> Decimal | None:
        if self.soft_limit_percent is None:
            return None
        return self.limit * self.soft_limit_percent / 100


@dataclass(frozen=True, slots=True)
class BudgetWarning:
    """A budget past its soft limit (or a ``warn`` budget past its limit, or a ``downgrade``
    budget that switched the turn's model) — the ``budget_warning`` event's payload.

    ``spent`` is what was spent plus what calls running now have reserved (their worst case);
    for a budget shared with others (a group, tenant, chain or everyone) it is left out
    (``None``) — the caller sees the share used, not what others spent.
    """

    budget: str
    spent: Decimal
    limit: Decimal
    currency: str
    reset_at: datetime | None
    over_limit: bool
    shared: bool = False
    #: The chat-model configuration the turn was switched to (``downgrade`` budgets).
    downgraded_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "spent": None if self.shared else money(self.spent),
            "limit": money(self.limit),
            "currency": self.currency,
            "percent": float(round(self.spent * 100 / self.limit, 1)) if self.limit else 100.0,
            "reset_at": self.reset_at.isoformat() if self.reset_at else None,
            "over_limit": self.over_limit,
            "downgraded_to": self.downgraded_to,
        }


# -- which budgets apply ------------------------------------------------------------------


_TABLE = BudgetCounter._meta.db_table
_BUDGETS = Budget._meta.db_table


@dataclass(frozen=True, slots=True)
class _Cached:
    read_at: float
    #: The :func:`budgets_stamp` the list was read for (``None``: read without one).
    stamp: str | None
    rows: tuple[Budget, ...]


_lock = threading.Lock()
_cache: _Cached | None = None


def clear_budget_cache(**_: Any) -> None:
    """Drop this process's list of enabled budgets (on every save or delete of one here, and
    when a turn finds one changed elsewhere)."""
    global _cache
    _cache = None


post_save.connect(clear_budget_cache, sender=Budget, dispatch_uid="budgets-save")
post_delete.connect(clear_budget_cache, sender=Budget, dispatch_uid="budgets-delete")


def budgets_stamp() -> RawSQL:
    """An expression of the budgets' state, to read in a query that runs anyway (a turn reads
    it with its chain version, as the label is read): a text that changes with every insert,
    update or delete of a budget row, in any process and by any means (admin, shell, raw SQL).
    Pass what it read to :func:`applicable_budgets`. (The row count and the sum of the rows'
    ``xmin``, the transaction that last wrote each: PostgreSQL only, as the counters' upserts.)"""
    return RawSQL(
        f"SELECT count(*)::text || ':' || coalesce(sum(xmin::text::bigint), 0)::text "
        f'FROM "{_BUDGETS}"',
        (),
    )


def _enabled_budgets(stamp: str | None) -> tuple[Budget, ...]:
    global _cache
    cached = _cache
    if (
        cached is not None
        and time.monotonic() - cached.read_at < CACHE_SECONDS
        and (stamp is None or stamp == cached.stamp)
    ):
        return cached.rows
    with _lock:
        rows = tuple(
            Budget.objects.filter(enabled=True)
            .select_related("downgrade_to")
            .annotate(row_version=RawSQL(f'"{_BUDGETS}".xmin::text', ()))
        )
        # The stamp was read before these rows: should a budget have changed in between, the
        # next stamp differs and the list is read again (never kept stale).
        _cache = _Cached(time.monotonic(), stamp, rows)
    return rows


def applicable_budgets(
    user: Any,
    chain_id: int | None,
    tenant_of: Callable[[], str | None],
    stamp: str | None = None,
) -> list[ApplicableBudget]:
    """Blocking: the enabled budgets that count ``user``'s turn on chain ``chain_id``;
    ``tenant_of`` gives the user's tenant (asked only when a tenant budget exists). No query
    while the cached list is fresh and no group budget exists. Fresh: younger than
    :data:`CACHE_SECONDS` and, when ``stamp`` (what :func:`budgets_stamp` read) is given, read
    for that stamp — so a budget created, changed or deleted in another process is seen at
    once."""
    budgets = _enabled_budgets(stamp)
    if not budgets:
        return []
    groups: set[int] | None = None
    tenant: str | None = None
    if any(b.scope == Budget.Scope.TENANT for b in budgets):
        tenant = tenant_of()
    found = []
    for budget in budgets:
        subject = None
        if budget.scope == Budget.Scope.USER:
            if budget.user_id in (None, user.pk):
                subject = f"user:{user.pk}"
        elif budget.scope == Budget.Scope.GROUP:
            if groups is None:
                groups = set(user.groups.values_list("pk", flat=True))
            if budget.group_id in groups:
                subject = f"group:{budget.group_id}"
        elif budget.scope == Budget.Scope.TENANT:
            if tenant and budget.tenant in ("", tenant):
                subject = f"tenant:{tenant}"
        elif budget.scope == Budget.Scope.CHAIN:
            if chain_id is not None and budget.chain_id in (None, chain_id):
                subject = f"chain:{chain_id}"
        else:
            subject = "global"
        if subject is None:
            continue
        downgrade = None
        if budget.action == Budget.Action.DOWNGRADE and budget.downgrade_to is not None:
            downgrade = (budget.downgrade_to.slug, budget.downgrade_to.to_config())
        found.append(
            ApplicableBudget(
                budget.pk,
                budget.name,
                subject,
                budget.period,
                budget.limit,
                budget.currency,
                budget.soft_limit_percent,
                budget.action,
                downgrade,
                budget.row_version,
            )
        )
    return found


# -- the check before a turn runs -------------------------------------------------------

# Before a turn runs: each budget's row as it is now (none when deleted or disabled) with the
# subject's counter, in one query.
_STATES = f"""
SELECT b.id, b."limit", b.xmin::text, c.period_start, c.spent, c.reserved, c.tripped_period
FROM unnest(%(budgets)s::bigint[], %(subjects)s::text[]) AS k(budget_id, subject)
JOIN {_BUDGETS} b ON b.id = k.budget_id AND b.enabled
LEFT JOIN {_TABLE} c ON c.budget_id = k.budget_id AND c.subject = k.subject
"""

_WARNED = f"""
UPDATE {_TABLE} SET warned_period = %(start)s
WHERE budget_id = %(budget)s AND subject = %(subject)s
    AND (warned_period IS NULL OR warned_period < %(start)s)
"""

#: The most one amount may be (the counters hold 10 digits before the point): an absurd
#: price × token count is capped here rather than overflowing the column.
MAX_AMOUNT = Decimal("999999999")


def clamp(amount: Decimal) -> Decimal:
    """``amount`` capped at :data:`MAX_AMOUNT`."""
    return min(amount, MAX_AMOUNT)


def _per(budget: ApplicableBudget) -> str:
    return "in total" if budget.period == Budget.Period.TOTAL else f"per {budget.period}"


def refusal(
    budget: ApplicableBudget, used: Decimal | None = None, estimate: Decimal | None = None
) -> BudgetExceededError:
    """The refusal by ``budget``: used up (``used`` — spent and reserved — at its limit), or
    with less left than the call's worst case ``estimate``."""
    _, end = period_bounds(budget.period)
    when = f"; it resets at {end.isoformat()}" if end else ""
    named = f"The budget {budget.name!r} ({money(budget.limit)} {budget.currency} {_per(budget)})"
    currency = budget.currency
    if used is not None and used >= budget.limit:
        why = "is used up"
    elif estimate is not None and estimate > budget.limit:
        why = (
            f"this call may cost up to {money(estimate)} {currency}, more than the whole "
            "budget: ask for a shorter answer (max_tokens)"
        )
    elif used is not None and estimate is not None and used < budget.limit:
        why = (
            f"has {money(budget.limit - used)} {currency} left, less than this call may cost "
            f"(up to {money(estimate)} {currency})"
        )
    else:
        why = "is used up"
    return BudgetExceededError(
        f"{named} {why}{when}." if why.startswith(("is", "has")) else f"{named}: {why}{when}.",
        budget=budget.name,
        limit=budget.limit,
        currency=budget.currency,
        period=budget.period,
        reset_at=end,
    )


def warnings_for(
    results: Iterable[tuple[ApplicableBudget, Decimal, Decimal]], user: Any, signal: bool = True
) -> list[BudgetWarning]:
    """The warnings of budgets past their soft limit; with ``signal``, the first of a
    period is also sent as :data:`budget_warning`."""
    warnings = []
    for budget, spent, reserved in results:
        used = spent + reserved
        over = used > budget.limit
        soft = budget.soft_limit
        if not (over and budget.action == Budget.Action.WARN) and (soft is None or used < soft):
            continue
        start, end = period_bounds(budget.period)
        shared = user is None or budget.subject != f"user:{user.pk}"
        warning = BudgetWarning(budget.name, used, budget.limit, budget.currency, end, over, shared)
        warnings.append(warning)
        if not signal:
            continue
        with connection.cursor() as cursor:
            params = {"budget": budget.id, "subject": budget.subject, "start": start}
            cursor.execute(_WARNED, params)
            first = cursor.rowcount == 1
        if first:
            budget_warning.send(
                sender=Budget,
                budget=budget.name,
                subject=budget.subject,
                spent=used,
                limit=budget.limit,
                currency=budget.currency,
                reset_at=end,
                user=user,
            )
    return warnings


def precheck(
    budgets: Sequence[ApplicableBudget], floors: dict[str, Decimal], user: Any = None
) -> tuple[BudgetExceededError | None, list[BudgetWarning], set[int]]:
    """Blocking, one query (none without budgets), before the turn runs: the refusal to raise
    at once — a ``block`` budget that cannot take even ``floors`` (per currency: the least
    the turn's first model call may cost, the message alone as its prompt), so a stream is
    refused before it opens —, the warnings of budgets already past their soft limit, and
    the ``downgrade`` budgets reached this period (the turn starts on the cheaper model).

    Each budget's limit is its row's as it is now; a budget deleted or disabled since this
    process read the list counts nothing. Either drops the list, so the next turn reads it
    again."""
    if not budgets:
        return None, [], set()
    with connection.cursor() as cursor:
        ids, subjects = [b.id for b in budgets], [b.subject for b in budgets]
        cursor.execute(_STATES, {"budgets": ids, "subjects": subjects})
        rows = {row[0]: row[1:] for row in cursor.fetchall()}
    if len(rows) < len(budgets) or any(
        b.id in rows and rows[b.id][1] != b.version for b in budgets
    ):
        clear_budget_cache()
    results = []
    tripped: set[int] = set()
    for budget in budgets:
        row = rows.get(budget.id)
        if row is None:
            continue
        limit, _version, period_start, spent, reserved, tripped_period = row
        if limit != budget.limit:
            budget = replace(budget, limit=limit)
        start = period_bounds(budget.period)[0]
        current = period_start is not None and period_start >= start
        used = spent + reserved if current else _ZERO
        floor = clamp(floors.get(budget.currency, _ZERO))
        if budget.action == Budget.Action.BLOCK and (
            used >= budget.limit or used + floor > budget.limit
        ):
            return refusal(budget, used, floor or None), [], set()
        if (
            budget.action == Budget.Action.DOWNGRADE
            and tripped_period is not None
            and tripped_period >= start
        ):
            tripped.add(budget.id)
        if current:
            results.append((budget, spent, reserved))
    return None, warnings_for(results, user=user, signal=False), tripped


def counter_state(keys: Iterable[tuple[int, str]]) -> dict[tuple[int, str], BudgetCounter]:
    """Blocking: the counters for ``(budget id, subject)`` pairs, in one query."""
    keys = list(keys)
    if not keys:
        return {}
    from django.db.models import Q

    query = Q()
    for budget_id, subject in keys:
        query |= Q(budget_id=budget_id, subject=subject)
    return {(c.budget_id, c.subject): c for c in BudgetCounter.objects.filter(query)}
