"""Budgets: which apply to a turn, and reserving, settling and releasing spend atomically.

Before each model call a turn **reserves** the call's worst case on every budget that applies
to it (:func:`reserve`): one conditional upsert of the budget's counter per budget —
``spent + reserved + estimate <= limit``, evaluated by PostgreSQL on the locked row — so
parallel calls can never pass a limit together (the check-then-record race of peers). The same
statement settles the previous round of the turn (its actual cost moves from ``reserved`` to
``spent``) and rolls the counter into a new period when the old one ended. When the turn ends,
:func:`settle` books what is still outstanding: the last round's cost, and the release of
every reservation not used (errors, cancelled streams).

- ``block`` budgets refuse the call (:class:`~advisors_app.core.exceptions.BudgetExceededError`
  with the period's reset time);
- ``downgrade`` budgets switch the turn to their cheaper chat model for the rest of the period
  (the counter remembers the period it was reached in);
- ``warn`` budgets never refuse.
Any budget past its soft limit (or a ``warn`` budget past its limit) adds a warning to the turn;
the first time in a period it is also sent as the :data:`budget_warning` signal.

Spend in another currency than the budget's is not counted against it (logged); a call whose
price is unknown reserves nothing (its cost is flagged unknown in the call log).
A reservation left by a process that died is dropped when the counter's period rolls over.
"""

from __future__ import annotations

import calendar
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import Signal
from django.utils import timezone

from advisors_app.core.exceptions import BudgetExceededError
from advisors_app.models import Budget, BudgetCounter

__all__ = [
    "ApplicableBudget",
    "BudgetWarning",
    "Reservation",
    "applicable_budgets",
    "budget_warning",
    "clear_budget_cache",
    "counter_state",
    "money",
    "period_bounds",
    "precheck",
    "reserve",
    "settle",
]

logger = logging.getLogger(__name__)
_ZERO = Decimal(0)

#: Sent once per budget, subject and period when spend passes the soft limit (or a ``warn``
#: budget's limit): ``sender=Budget``, ``budget``, ``subject``, ``spent`` (spent + reserved),
#: ``limit``, ``currency``, ``reset_at``, ``user`` (whose call crossed it).
budget_warning = Signal()

#: How long a process keeps the list of enabled budgets (dropped at once on a local change).
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


@dataclass
class Reservation:
    """What one turn has booked per budget and not yet settled."""

    #: Budget id → reserved amount not yet released.
    reserved: dict[int, Decimal] = field(default_factory=dict)
    #: Budget id → actual cost not yet added to ``spent``.
    unsettled: dict[int, Decimal] = field(default_factory=dict)


# -- which budgets apply ------------------------------------------------------------------


_lock = threading.Lock()
_cache: tuple[float, tuple[Budget, ...]] | None = None


def clear_budget_cache(**_: Any) -> None:
    global _cache
    _cache = None


post_save.connect(clear_budget_cache, sender=Budget, dispatch_uid="budgets-save")
post_delete.connect(clear_budget_cache, sender=Budget, dispatch_uid="budgets-delete")


def _enabled_budgets() -> tuple[Budget, ...]:
    global _cache
    cached = _cache
    if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
        return cached[1]
    with _lock:
        rows = tuple(Budget.objects.filter(enabled=True).select_related("downgrade_to"))
        _cache = (time.monotonic(), rows)
    return rows


def applicable_budgets(
    user: Any, chain_id: int | None, tenant_of: Callable[[], str | None]
) -> list[ApplicableBudget]:
    """Blocking: the enabled budgets that count ``user``'s turn on chain ``chain_id``;
    ``tenant_of`` gives the user's tenant (asked only when a tenant budget exists). No query
    while the cached list is fresh and no group budget exists."""
    budgets = _enabled_budgets()
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
            )
        )
    return found


# -- reserving and settling ---------------------------------------------------------------

_TABLE = BudgetCounter._meta.db_table

# One statement per budget: roll the counter into the current period, settle the turn's
# previous round, and reserve this round — only where the result stays within the limit
# (``%(conditional)s`` false: always). ``c`` is the stored row, EXCLUDED the new values.
_RESERVE = f"""
INSERT INTO {_TABLE} AS c
    (budget_id, subject, period_start, spent, reserved, updated_at)
VALUES (%(budget)s, %(subject)s, %(start)s, %(settle)s, %(estimate)s, now())
ON CONFLICT (budget_id, subject) DO UPDATE SET
    spent = (CASE WHEN c.period_start < EXCLUDED.period_start THEN 0 ELSE c.spent END)
        + %(settle)s,
    reserved = GREATEST(
        (CASE WHEN c.period_start < EXCLUDED.period_start THEN 0 ELSE c.reserved END)
        - %(release)s, 0) + %(estimate)s,
    period_start = GREATEST(c.period_start, EXCLUDED.period_start),
    updated_at = now()
WHERE NOT %(conditional)s OR (
    (c.tripped_period IS NULL OR c.tripped_period < EXCLUDED.period_start)
    AND (CASE WHEN c.period_start < EXCLUDED.period_start THEN 0 ELSE c.spent END)
        + %(settle)s
        + GREATEST((CASE WHEN c.period_start < EXCLUDED.period_start THEN 0
                    ELSE c.reserved END) - %(release)s, 0)
        + %(estimate)s <= %(limit)s)
RETURNING spent, reserved
"""

_TRIP = f"""
INSERT INTO {_TABLE} AS c
    (budget_id, subject, period_start, spent, reserved, tripped_period, updated_at)
VALUES (%(budget)s, %(subject)s, %(start)s, 0, 0, %(start)s, now())
ON CONFLICT (budget_id, subject) DO UPDATE SET tripped_period = EXCLUDED.tripped_period
"""

_WARNED = f"""
UPDATE {_TABLE} SET warned_period = %(start)s
WHERE budget_id = %(budget)s AND subject = %(subject)s
    AND (warned_period IS NULL OR warned_period < %(start)s)
"""

_SETTLE = f"""
UPDATE {_TABLE} SET spent = spent + %(settle)s,
    reserved = GREATEST(reserved - %(release)s, 0), updated_at = now()
WHERE budget_id = %(budget)s AND subject = %(subject)s
"""


class _Refused(Exception):
    def __init__(self, budget: ApplicableBudget, estimate: Decimal) -> None:
        self.budget = budget
        self.estimate = estimate


#: The most one amount may be (the counters hold 10 digits before the point): an absurd
#: price × token count is capped here rather than overflowing the column.
MAX_AMOUNT = Decimal("999999999")


def clamp(amount: Decimal) -> Decimal:
    """``amount`` capped at :data:`MAX_AMOUNT`."""
    return min(amount, MAX_AMOUNT)


def _per(budget: ApplicableBudget) -> str:
    return "in total" if budget.period == Budget.Period.TOTAL else f"per {budget.period}"


def _refusal(
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


def _used(budget: ApplicableBudget) -> Decimal | None:
    """Blocking: what the budget's subject has spent and reserved in this period."""
    state = counter_state([(budget.id, budget.subject)]).get((budget.id, budget.subject))
    if state is None or state.period_start < period_bounds(budget.period)[0]:
        return _ZERO
    return state.spent + state.reserved


def reserve(
    budgets: Sequence[ApplicableBudget],
    estimates: dict[str, Decimal],
    booked: Reservation,
    *,
    user: Any = None,
    downgrade_estimates: dict[str, Decimal] | None = None,
    tripped: set[int] | None = None,
) -> tuple[ApplicableBudget | None, list[BudgetWarning]]:
    """Blocking: reserve a call on every budget, all or none (one transaction).

    ``estimates`` maps a currency to the call's worst-case cost in it (``{}``: an unknown
    price); ``booked`` is the turn's reservation so far, updated in place; ``tripped`` the
    ``downgrade`` budgets already reached this period (updated in place): they take the call
    without condition. Returns the downgrade budget whose cheaper model the call must go to
    (``None``: keep the model) and the warnings. A ``block`` budget that cannot take the call
    raises :class:`BudgetExceededError`; a ``downgrade`` budget that cannot makes the call go
    to its cheaper model (``downgrade_estimates``: that model's worst cases), and so does a
    block budget while a downgrade budget has been reached (the cheaper call may still fit).
    """
    tripped = tripped if tripped is not None else set()
    try:
        return None, _reserve_all(budgets, estimates, booked, user, tripped)
    except _Refused as refused:
        first = refused
    downgrades = [b for b in budgets if b.downgrade_to is not None]
    reached = first.budget if first.budget.downgrade_to is not None else None
    if reached is None:
        reached = next((b for b in downgrades if b.id in tripped), None)
    if reached is None or downgrade_estimates is None:
        raise _refusal(first.budget, _used(first.budget), first.estimate) from None
    if reached.id not in tripped:
        _trip(reached)
        tripped.add(reached.id)
    try:
        warnings = _reserve_all(budgets, downgrade_estimates, booked, user, tripped)
    except _Refused as refused:
        raise _refusal(refused.budget, _used(refused.budget), refused.estimate) from None
    return reached, warnings


def _reserve_all(
    budgets: Sequence[ApplicableBudget],
    estimates: dict[str, Decimal],
    booked: Reservation,
    user: Any,
    tripped: set[int],
) -> list[BudgetWarning]:
    results: list[tuple[ApplicableBudget, Decimal, Decimal]] = []
    # One lock order for every transaction (no deadlocks): downgrade budgets first, so that
    # reaching one switches the model before a block budget refuses the dearer call.
    ordered = sorted(budgets, key=lambda b: (b.action != Budget.Action.DOWNGRADE, b.id))
    with transaction.atomic(), connection.cursor() as cursor:
        for budget in ordered:
            estimate = clamp(estimates.get(budget.currency, _ZERO))
            settle_amount = clamp(booked.unsettled.get(budget.id, _ZERO))
            release = booked.reserved.get(budget.id, _ZERO)
            conditional = budget.action != Budget.Action.WARN and budget.id not in tripped
            start, _ = period_bounds(budget.period)
            if conditional and settle_amount + estimate > budget.limit:
                raise _Refused(budget, estimate)  # not even an empty counter could take it
            cursor.execute(
                _RESERVE,
                {
                    "budget": budget.id,
                    "subject": budget.subject,
                    "start": start,
                    "settle": settle_amount,
                    "release": release,
                    "estimate": estimate,
                    "conditional": conditional,
                    "limit": budget.limit,
                },
            )
            row = cursor.fetchone()
            if row is None:
                raise _Refused(budget, estimate)  # rolls back this call's other reservations
            results.append((budget, row[0], row[1]))
    # Committed: the turn's books move on.
    for budget, _spent, _reserved in results:
        booked.unsettled.pop(budget.id, None)
        booked.reserved[budget.id] = clamp(estimates.get(budget.currency, _ZERO))
    return _warnings(results, user)


def _trip(budget: ApplicableBudget) -> None:
    start, _ = period_bounds(budget.period)
    with connection.cursor() as cursor:
        cursor.execute(_TRIP, {"budget": budget.id, "subject": budget.subject, "start": start})


def _warnings(
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


def settle(budgets: Sequence[ApplicableBudget], booked: Reservation) -> None:
    """Blocking: book what the turn still owes — its last costs into ``spent`` and every
    reservation it holds released (errors and cancellations included). ``booked`` is left as
    it is: the caller clears it once the transaction commits."""
    by_id = {budget.id: budget for budget in budgets}
    with connection.cursor() as cursor:
        for budget_id in sorted(set(booked.reserved) | set(booked.unsettled)):
            settle_amount = clamp(booked.unsettled.get(budget_id, _ZERO))
            release = booked.reserved.get(budget_id, _ZERO)
            if settle_amount or release:
                cursor.execute(
                    _SETTLE,
                    {
                        "budget": budget_id,
                        "subject": by_id[budget_id].subject,
                        "settle": settle_amount,
                        "release": release,
                    },
                )


def precheck(
    budgets: Sequence[ApplicableBudget], floors: dict[str, Decimal], user: Any = None
) -> tuple[BudgetExceededError | None, list[BudgetWarning], set[int]]:
    """Blocking, one query (none without budgets), before the turn runs: the refusal to raise
    at once — a ``block`` budget that cannot take even ``floors`` (per currency: the least
    the turn's first model call may cost, the message alone as its prompt), so a stream is
    refused before it opens —, the warnings of budgets already past their soft limit, and
    the ``downgrade`` budgets reached this period (the turn starts on the cheaper model)."""
    if not budgets:
        return None, [], set()
    states = counter_state((b.id, b.subject) for b in budgets)
    results = []
    tripped: set[int] = set()
    for budget in budgets:
        state = states.get((budget.id, budget.subject))
        start = period_bounds(budget.period)[0]
        current = state is not None and state.period_start >= start
        used = state.spent + state.reserved if state is not None and current else _ZERO
        floor = clamp(floors.get(budget.currency, _ZERO))
        if budget.action == Budget.Action.BLOCK and (
            used >= budget.limit or used + floor > budget.limit
        ):
            return _refusal(budget, used, floor or None), [], set()
        if (
            budget.action == Budget.Action.DOWNGRADE
            and state is not None
            and state.tripped_period is not None
            and state.tripped_period >= start
        ):
            tripped.add(budget.id)
        if state is not None and current:
            results.append((budget, state.spent, state.reserved))
    return None, _warnings(results, user=user, signal=False), tripped


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
