"""A budget deleted, disabled or changed in one process, as another process's turns see it
(issue 36, item 8): never a failed turn, the new limit at the next turn, a new budget with the
next stamp. The other process is a real one (``tests.budget_worker``) whose budget list never
expires, so nothing here waits for a cache's lifetime to run out."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.db import connection, connections, transaction

from advisors_app.costs.budgets import applicable_budgets, budgets_stamp, clear_budget_cache
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.costs.reservations import Reservation, reserve
from advisors_app.models import AdvisorChain, Budget, BudgetCounter, ModelPrice
from tests.factories import make_chain, scripted_model
from tests.helpers import database_url_for_subprocess, subprocess_env

pytestmark = pytest.mark.django_db(transaction=True)
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    clear_price_cache()
    clear_budget_cache()
    yield
    clear_price_cache()
    clear_budget_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> Any:
    """A chain on a scripted model priced by an admin price (1 and 2 per million tokens)."""
    model = scripted_model("priced", responses=("Fine.",))
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model, input_per_million=Decimal(1), output_per_million=Decimal(2)
    )
    return make_chain(model=model, system_prompt="Be brief.")


class Worker:
    """A long-lived Django process speaking the ``tests.budget_worker`` protocol."""

    def __init__(self) -> None:
        env = subprocess_env(
            DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=database_url_for_subprocess()
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.budget_worker"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, **command: object) -> dict[str, Any]:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"worker exited with {self.process.wait()}"
        answer: dict[str, Any] = json.loads(line)
        return answer

    def turn(self, chain: Any, user: Any, message: str = "hi") -> dict[str, Any]:
        return self.send(op="turn", chain=chain.slug, user=user.pk, message=message)

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture
def worker() -> Iterator[Worker]:
    started = Worker()
    yield started
    started.close()


OK = {"status": "ok"}


@pytest.mark.slow
def test_a_budget_deleted_in_another_process_never_fails_a_turn(
    chain: Any, user: Any, worker: Worker, django_user_model: Any
) -> None:
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal(1))
    bob = django_user_model.objects.create_user("bob", password="pw")
    assert worker.turn(chain, user) == OK  # the worker now holds the list with the budget
    assert BudgetCounter.objects.filter(budget=budget).exists()

    budget.delete()  # here: alice's counter goes with it; bob never had one

    assert worker.turn(chain, user) == OK
    assert worker.turn(chain, bob) == OK
    assert not BudgetCounter.objects.exists()


@pytest.mark.slow
def test_a_limit_changed_in_another_process_holds_at_the_next_turn(
    chain: Any, user: Any, worker: Worker
) -> None:
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal(1))
    assert worker.turn(chain, user) == OK
    # As a shell or another server might: no signal reaches the worker.
    Budget.objects.filter(pk=budget.pk).update(limit=Decimal("0.000001"))
    assert worker.turn(chain, user) == {"refused": "budget_exceeded"}
    Budget.objects.filter(pk=budget.pk).update(limit=Decimal(1))
    assert worker.turn(chain, user) == OK
    # A disabled budget counts nothing, even one that is used up.
    Budget.objects.filter(pk=budget.pk).update(limit=Decimal(0), enabled=False)
    assert worker.turn(chain, user) == OK


def stamp() -> str:
    """The budgets' stamp, read in a query as a turn reads it with its chain version."""
    found: str = (
        AdvisorChain.objects.annotate(stamp=budgets_stamp()).values_list("stamp", flat=True)
    ).first()
    return found


@pytest.mark.slow
def test_a_budget_created_in_another_process_is_seen_with_the_next_stamp(
    chain: Any, user: Any, worker: Worker
) -> None:
    Budget.objects.create(name="daily", period="day", limit=Decimal(1))
    first = stamp()
    assert worker.send(op="budgets", user=user.pk, stamp=first) == {"names": ["daily"]}
    Budget.objects.create(name="weekly", period="week", limit=Decimal(1))
    # The list the worker read for the old stamp is still what it holds for that stamp...
    assert worker.send(op="budgets", user=user.pk, stamp=first) == {"names": ["daily"]}
    # ... and any change to any budget row, however made, gives another stamp.
    second = stamp()
    assert second != first
    assert worker.send(op="budgets", user=user.pk, stamp=second) == {"names": ["daily", "weekly"]}
    Budget.objects.filter(name="weekly").update(scope="chain")
    assert stamp() != second
    assert worker.send(op="budgets", user=user.pk, stamp=stamp()) == {"names": ["daily"]}


def wait_for_a_lock_wait() -> None:
    """Return once some backend of this database waits on a lock (polled, not timed)."""
    with connections["default"].cursor() as cursor:
        for _ in range(5000):
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            if cursor.fetchone()[0]:
                return
            time.sleep(0.002)
    raise AssertionError("no backend ever waited on a lock")


def test_a_budget_deleted_while_a_reservation_commits_is_skipped(user: Any) -> None:
    """The delete lands between the reservation's statement (which still saw the budget) and
    its commit, where the new counter's foreign key is checked: the reservation is written
    again, finds the budget gone, and skips it."""
    budget = Budget.objects.create(name="daily", period="day", limit=Decimal(1))
    [applicable] = applicable_budgets(user, None, lambda: None)
    deleted, commit = threading.Event(), threading.Event()

    def delete() -> None:
        try:
            with transaction.atomic():
                Budget.objects.filter(pk=budget.pk).delete()
                deleted.set()
                commit.wait()
        finally:
            connection.close()

    def commit_once_the_reservation_waits() -> None:
        try:
            wait_for_a_lock_wait()  # the counter's foreign key waits for the delete
        finally:
            commit.set()
            connection.close()

    deleter = threading.Thread(target=delete)
    deleter.start()
    deleted.wait()
    releaser = threading.Thread(target=commit_once_the_reservation_waits)
    releaser.start()
    booked = Reservation()
    try:
        reached, warnings = reserve([applicable], {"USD": Decimal("0.01")}, booked)
    finally:
        releaser.join()
        deleter.join()

    assert (reached, warnings) == (None, [])
    assert booked.vanished == {budget.pk} and booked.reserved == {}
    assert not Budget.objects.exists() and not BudgetCounter.objects.exists()
