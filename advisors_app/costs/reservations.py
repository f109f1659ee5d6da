"""Reserving, settling and releasing a turn's spend on its budgets, atomically.

Before each model call a turn **reserves** the call's worst case on every budget that applies
to it (:func:`reserve`): one conditional upsert of the budget's counter per budget —
``spent + reserved + estimate <= limit``, evaluated by PostgreSQL on the locked row — so
parallel calls can never pass a limit together (the check-then-record race of peers). The same
statement settles the previous round of the turn (its actual cost moves from ``reserved`` to
``spent``: a round that cost more than it reserved is booked before the next may reserve, and
refused when the books then leave no room) and rolls the counter into a new period when the
old one ended. When the turn ends, :func:`settle` books what is still outstanding: the last
round's cost, and the release of every reservation not used (errors, cancelled streams).

A turn's reservation is also a :class:`~advisors_app.models.BudgetReservation` row (its trace id,
the budget, the amount, the process running it), written by the same statement that reserves and
deleted by the one that settles; what a turn releases is what its row holds. So a turn whose
process died (``SIGKILL``, a lost machine) leaves a row, and :mod:`advisors_app.turn.recovery`
releases it — a turn it took for gone releases nothing twice.

The limit is read from the budget's row by the statement itself, so a limit changed in
another process holds at once; a budget deleted or disabled while a turn runs is skipped from
then on (logged), never a failure of the turn — including a delete that lands between the
statement and its commit (the counter's foreign key), which is retried and then reads the
budget as gone. Which budgets apply, and the check before a turn runs, are in
:mod:`advisors_app.costs.budgets`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any

from django.db import DatabaseError, connection, transaction

from advisors_app.costs.budgets import (
    ApplicableBudget,
    BudgetWarning,
    clamp,
    clear_budget_cache,
    counter_state,
    money,
    period_bounds,
    refusal,
    warnings_for,
)
from advisors_app.models import Budget, BudgetCounter, BudgetReservation

__all__ = ["Reservation", "release_stranded", "reserve", "settle"]

logger = logging.getLogger(__name__)
_ZERO = Decimal(0)
_TABLE = BudgetCounter._meta.db_table
_BUDGETS = Budget._meta.db_table
_LEDGER = BudgetReservation._meta.db_table


@dataclass
class Reservation:
    """What one turn has booked per budget and not yet settled."""

    #: Budget id → reserved amount not yet released.
    reserved: dict[int, Decimal] = field(default_factory=dict)
    #: Budget id → actual cost not yet added to ``spent``.
    unsettled: dict[int, Decimal] = field(default_factory=dict)
    #: Budgets found deleted or disabled since the turn began: skipped from then on.
    vanished: set[int] = field(default_factory=set)
    #: The turn's trace id and ``"<host>:<pid>"``: each reservation is also written as a
    #: :class:`~advisors_app.models.BudgetReservation` row under them, so that one whose
    #: process died is released by :mod:`advisors_app.turn.recovery` (``None``: not written,
    #: and what the turn releases is what it remembers).
    turn: str | None = None
    owner: str = ""


# What the turn releases on a budget: what its BudgetReservation row holds (none left: the
# recovery released it already, as for a turn taken as gone), else what it remembers.
_RELEASE = f"""(CASE WHEN %(turn)s::text IS NULL THEN %(release)s ELSE COALESCE(
    (SELECT amount FROM {_LEDGER} WHERE turn = %(turn)s AND budget_id = %(budget)s), 0) END)"""

# One statement per budget: roll the counter into the current period, settle the turn's
# previous round, and reserve this round — only where the result stays within the limit
# (``%(conditional)s`` false: always). ``c`` is the stored row, EXCLUDED the new values. The
# limit is the budget row's as it is now (another process may have changed it); a budget
# deleted or disabled meanwhile gives no row at all, and nothing is written for it (a counter
# inserted for a deleted budget would fail the foreign key). One row otherwise: the limit, and
# the counter's spent and reserved (NULL: refused).
_RESERVE = f"""
WITH b AS (SELECT id, "limit" FROM {_BUDGETS} WHERE id = %(budget)s AND enabled),
up AS (
    INSERT INTO {_TABLE} AS c
        (budget_id, subject, period_start, spent, reserved, updated_at)
    SELECT b.id, %(subject)s, %(start)s, %(settle)s, %(estimate)s, now() FROM b
    WHERE NOT %(conditional)s OR %(settle)s + %(estimate)s <= b."limit"
    ON CONFLICT (budget_id, subject) DO UPDATE SET
        spent = (CASE WHEN c.period_start < EXCLUDED.period_start THEN 0 ELSE c.spent END)
            + %(settle)s,
        reserved = GREATEST(
            (CASE WHEN c.period_start < EXCLUDED.period_start THEN 0 ELSE c.reserved END)
            - {_RELEASE}, 0) + %(estimate)s,
        period_start = GREATEST(c.period_start, EXCLUDED.period_start),
        updated_at = now()
    WHERE NOT %(conditional)s OR (
        (c.tripped_period IS NULL OR c.tripped_period < EXCLUDED.period_start)
        AND (CASE WHEN c.period_start < EXCLUDED.period_start THEN 0 ELSE c.spent END)
            + %(settle)s
            + GREATEST((CASE WHEN c.period_start < EXCLUDED.period_start THEN 0
                        ELSE c.reserved END) - {_RELEASE}, 0)
            + %(estimate)s <= (SELECT "limit" FROM b))
    RETURNING c.spent, c.reserved, c.period_start
),
ledger AS (
    INSERT INTO {_LEDGER} AS r
        (turn, budget_id, subject, period_start, amount, owner, created_at, updated_at)
    SELECT %(turn)s, %(budget)s, %(subject)s, up.period_start, %(estimate)s, %(owner)s,
        now(), now()
    FROM up WHERE %(turn)s::text IS NOT NULL
    ON CONFLICT (turn, budget_id) DO UPDATE SET amount = EXCLUDED.amount,
        period_start = EXCLUDED.period_start, updated_at = now()
)
SELECT b."limit", up.spent, up.reserved FROM b LEFT JOIN up ON true
"""

_TRIP = f"""
INSERT INTO {_TABLE} AS c
    (budget_id, subject, period_start, spent, reserved, tripped_period, updated_at)
SELECT id, %(subject)s, %(start)s, 0, 0, %(start)s, now() FROM {_BUDGETS}
WHERE id = %(budget)s AND enabled
ON CONFLICT (budget_id, subject) DO UPDATE SET tripped_period = EXCLUDED.tripped_period
"""

_SETTLE = f"""
WITH mine AS (
    DELETE FROM {_LEDGER} WHERE turn = %(turn)s AND budget_id = %(budget)s RETURNING amount
)
UPDATE {_TABLE} SET spent = spent + %(settle)s,
    reserved = GREATEST(reserved - (CASE WHEN %(turn)s::text IS NULL THEN %(release)s
        ELSE COALESCE((SELECT amount FROM mine), 0) END), 0),
    updated_at = now()
WHERE budget_id = %(budget)s AND subject = %(subject)s
"""


class _Refused(Exception):
    def __init__(self, budget: ApplicableBudget, estimate: Decimal) -> None:
        self.budget = budget
        self.estimate = estimate


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
        raise refusal(first.budget, _used(first.budget), first.estimate) from None
    if reached.id not in tripped:
        _trip(reached)
        tripped.add(reached.id)
    try:
        warnings = _reserve_all(budgets, downgrade_estimates, booked, user, tripped)
    except _Refused as refused:
        raise refusal(refused.budget, _used(refused.budget), refused.estimate) from None
    return reached, warnings


#: SQLSTATEs of a budget deleted while a reservation was being written — the counter's
#: foreign key checked at commit, or the deadlock PostgreSQL breaks between the delete and the
#: upsert: the reservation is written again, and then reads the budget as gone.
_VANISHING = frozenset({"23503", "40P01"})
_ATTEMPTS = 3


def _budget_vanished(exc: DatabaseError) -> bool:
    return getattr(exc.__cause__, "sqlstate", None) in _VANISHING


def _reserve_all(
    budgets: Sequence[ApplicableBudget],
    estimates: dict[str, Decimal],
    booked: Reservation,
    user: Any,
    tripped: set[int],
) -> list[BudgetWarning]:
    attempts = _ATTEMPTS
    while True:
        attempts -= 1
        try:
            results = _reserve_once(budgets, estimates, booked, tripped)
            break
        except DatabaseError as exc:
            if not attempts or not _budget_vanished(exc):
                raise
    # Committed: the turn's books move on.
    for budget, _spent, _reserved in results:
        booked.unsettled.pop(budget.id, None)
        booked.reserved[budget.id] = clamp(estimates.get(budget.currency, _ZERO))
    return warnings_for(results, user)


def _reserve_once(
    budgets: Sequence[ApplicableBudget],
    estimates: dict[str, Decimal],
    booked: Reservation,
    tripped: set[int],
) -> list[tuple[ApplicableBudget, Decimal, Decimal]]:
    """One transaction of :func:`_reserve_all`: each result is the budget (with its limit as
    the row has it now), the counter's spent and reserved."""
    results: list[tuple[ApplicableBudget, Decimal, Decimal]] = []
    # One lock order for every transaction (no deadlocks): downgrade budgets first, so that
    # reaching one switches the model before a block budget refuses the dearer call.
    ordered = sorted(budgets, key=lambda b: (b.action != Budget.Action.DOWNGRADE, b.id))
    with transaction.atomic(), connection.cursor() as cursor:
        for budget in ordered:
            if budget.id in booked.vanished:
                continue
            estimate = clamp(estimates.get(budget.currency, _ZERO))
            cursor.execute(
                _RESERVE,
                {
                    "budget": budget.id,
                    "subject": budget.subject,
                    "start": period_bounds(budget.period)[0],
                    "settle": clamp(booked.unsettled.get(budget.id, _ZERO)),
                    "release": booked.reserved.get(budget.id, _ZERO),
                    "estimate": estimate,
                    "conditional": (
                        budget.action != Budget.Action.WARN and budget.id not in tripped
                    ),
                    "turn": booked.turn,
                    "owner": booked.owner,
                },
            )
            row = cursor.fetchone()
            if row is None:
                _vanished(budget, booked)
                continue
            limit, spent, reserved = row
            if limit != budget.limit:  # changed in another process
                clear_budget_cache()
                budget = replace(budget, limit=limit)
            if spent is None:
                raise _Refused(budget, estimate)  # rolls back this call's other reservations
            results.append((budget, spent, reserved))
    return results


def _vanished(budget: ApplicableBudget, booked: Reservation) -> None:
    """``budget`` was deleted or disabled since the turn read it: the turn's later calls skip
    it (what it booked there already is settled or released by :func:`settle`, if the counter
    is still there)."""
    logger.warning(
        "Budget %r (id %s) was deleted or disabled while a turn ran: its calls from now on "
        "are not counted against it",
        budget.name,
        budget.id,
    )
    booked.vanished.add(budget.id)
    clear_budget_cache()


def _trip(budget: ApplicableBudget) -> None:
    start, _ = period_bounds(budget.period)
    params = {"budget": budget.id, "subject": budget.subject, "start": start}
    try:
        # Its own transaction, so that a budget deleted meanwhile fails here, not later.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(_TRIP, params)
    except DatabaseError as exc:
        if not _budget_vanished(exc):
            raise
        logger.warning("Budget %r was deleted as a turn reached it", budget.name)


def settle(budgets: Sequence[ApplicableBudget], booked: Reservation) -> None:
    """Blocking: book what the turn still owes — its last costs into ``spent`` and every
    reservation it holds released (errors and cancellations included). ``booked`` is left as
    it is: the caller clears it once the transaction commits. A budget deleted meanwhile has
    no counter left to book on: skipped (logged)."""
    by_id = {budget.id: budget for budget in budgets}
    with connection.cursor() as cursor:
        for budget_id in sorted(set(booked.reserved) | set(booked.unsettled)):
            settle_amount = clamp(booked.unsettled.get(budget_id, _ZERO))
            release = booked.reserved.get(budget_id, _ZERO)
            if not (settle_amount or release or booked.turn):
                continue
            budget = by_id[budget_id]
            params = {
                "subject": budget.subject,
                "settle": settle_amount,
                "release": release,
                "turn": booked.turn,
            }
            cursor.execute(_SETTLE, {"budget": budget_id, **params})
            if cursor.rowcount == 0:
                logger.warning(
                    "Budget %r (id %s) was deleted while a turn ran: %s %s of its spend is "
                    "not counted against it",
                    budget.name,
                    budget_id,
                    money(settle_amount),
                    budget.currency,
                )


# Delete the rows and take their amounts off their counters — not off a counter rolled into a
# new period since (its reservations went with the old one); how many rows were released.
_RELEASE_STRANDED = f"""
WITH gone AS (
    DELETE FROM {_LEDGER} WHERE id = ANY(%(ids)s)
    RETURNING budget_id, subject, period_start, amount
),
sums AS (
    SELECT budget_id, subject, period_start, SUM(amount) AS amount FROM gone
    GROUP BY budget_id, subject, period_start
),
counters AS (
    UPDATE {_TABLE} AS c SET reserved = GREATEST(c.reserved - s.amount, 0), updated_at = now()
    FROM sums s
    WHERE c.budget_id = s.budget_id AND c.subject = s.subject
        AND c.period_start = s.period_start
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone)
"""


def release_stranded(ids: Sequence[int]) -> int:
    """Blocking, one statement: release the reservations ``ids``
    (:class:`~advisors_app.models.BudgetReservation` rows of turns whose process died, as
    :mod:`advisors_app.turn.recovery` finds them); how many were still held (a turn that
    settled meanwhile released its own)."""
    if not ids:
        return 0
    with connection.cursor() as cursor:
        cursor.execute(_RELEASE_STRANDED, {"ids": list(ids)})
        return int(cursor.fetchone()[0])
