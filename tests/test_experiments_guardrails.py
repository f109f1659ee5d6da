"""Guardrails (issue 37): an arm on a scripted model that fails 30 % of its turns trips the
error-rate guardrail on a real task worker, the experiment pauses, and every unit is back on the
control's version (through REST); the pause is recorded with its reason and signalled."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from advisors_app.definition import publish
from advisors_app.experiments import guardrails
from advisors_app.experiments.serving import clear_plans
from advisors_app.experiments.signals import experiment_paused
from advisors_app.experiments.stats import beyond_bound, rate_estimate
from advisors_app.models import CallLog, Experiment, ExperimentEvent
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model
from tests.task_worker import DbWorker, run_queued_tasks

pytestmark = pytest.mark.django_db(transaction=True)

#: Three failures in every ten answers, in a fixed order.
FLAKY = ["a", "b", {"error": "boom"}, "c", "d", {"error": "boom"}, "e", "f", {"error": "boom"}, "g"]


@pytest.fixture(autouse=True)
def fresh(fresh_chain_cache: None) -> Iterator[None]:
    clear_plans()
    yield
    clear_plans()


@pytest.fixture
def chain() -> Any:
    """Version 1 answers "one"; version 2 fails 30 % of its turns."""
    chain = make_chain("flaky", model=scripted_model("flaky-one", responses=("one",)))
    chain.chat_model = scripted_model("flaky-two", responses=FLAKY)
    chain.save()
    publish(chain, message="flaky")
    return chain


@pytest.fixture
def people(django_user_model: Any) -> tuple[list[Any], list[Any]]:
    """Ten users forced into the candidate, ten on the control."""
    make = django_user_model.objects.create_user
    return [make(f"cand{n}", password="pw") for n in range(10)], [
        make(f"ctrl{n}", password="pw") for n in range(10)
    ]


def start_experiment(candidates: list[Any]) -> int:
    runner = _runner()
    ops = client_for(runner)
    created = ops.post(
        "/api/chains/flaky/experiments/",
        {
            "name": "flaky candidate",
            "arms": [
                {"name": "control", "version": 1, "weight": 10_000},
                {"name": "candidate", "version": 2, "weight": 0},
            ],
            "guardrails": [{"metric": "error_rate", "max": 0.02}],
            "targeting": [{"arm": "candidate", "users": [u.username for u in candidates]}],
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    pk = created.json()["id"]
    assert ops.post(f"/api/experiments/{pk}/start/").status_code == 200
    return int(pk)


def _runner() -> Any:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    user = get_user_model().objects.create_user("runner", password="pw", is_staff=True)
    user.user_permissions.add(
        # Starting on production needs the rights of a promotion of production.
        *Permission.objects.filter(
            codename__in=[
                "run_experiment",
                "view_advisorchain",
                "change_chainlabel",
                "promote_production",
            ]
        )
    )
    return user


def ask(user: Any) -> dict[str, Any]:
    response = client_for(user).post("/api/chains/flaky/call/", {"message": "hi"}, format="json")
    return {"status": response.status_code, **response.json()}


def wait_for_queue(worker: DbWorker) -> None:
    """Until the worker has run every queued check (a safety deadline, not a timing)."""
    deadline = time.monotonic() + 60
    while DBTaskResult.objects.exclude(status__in=["SUCCESSFUL", "FAILED"]).exists():
        assert worker.process is not None and worker.process.poll() is None, worker.log()
        assert time.monotonic() < deadline, worker.log()
        time.sleep(0.05)


@override_settings(ADVISORS={"EXPERIMENT_CHECK_TURNS": 10, "CHAT_THROTTLE_RATE": ""})
def test_a_failing_arm_trips_its_guardrail_and_everyone_goes_back(
    chain: Any, people: tuple[list[Any], list[Any]], tmp_path: Path
) -> None:
    candidates, controls = people
    pk = start_experiment(candidates)
    with DbWorker(tmp_path / "worker.log") as worker:
        worker.wait_ready()
        for _ in range(30):
            for user in [*candidates, *controls]:
                ask(user)
            wait_for_queue(worker)
            if Experiment.objects.get(pk=pk).status == Experiment.Status.PAUSED:
                break
    experiment = Experiment.objects.get(pk=pk)
    assert experiment.status == Experiment.Status.PAUSED, worker.log()
    event = ExperimentEvent.objects.get(experiment=experiment, to_status="paused")
    assert event.actor is None
    assert "guardrail error_rate tripped on arm 'candidate'" in event.reason
    assert event.detail["method"] == "mSPRT" and event.detail["statistic"] >= 20
    assert DBTaskResult.objects.filter(status="SUCCESSFUL").exists()
    # Every unit is back on the control's version, candidates included; nothing more is
    # counted for the experiment.
    served = CallLog.objects.filter(experiment=experiment).count()
    for user in [*candidates, *controls]:
        answer = ask(user)
        assert (answer["status"], answer["content"], answer["version"]) == (200, "one", 1)
        assert "experiment" not in answer
    assert CallLog.objects.filter(experiment=experiment).count() == served
    results = client_for(_first_staff()).get(f"/api/experiments/{pk}/results/").json()
    arms = {arm["arm"]: arm for arm in results["arms"]}
    assert arms["candidate"]["error_rate"]["vs_control"]["significant"] is True
    assert arms["control"]["error_rate"]["value"] == 0.0


def _first_staff() -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="runner")


@override_settings(ADVISORS={"EXPERIMENT_CHECK_TURNS": 1000, "CHAT_THROTTLE_RATE": ""})
def test_a_trip_sends_the_signal_and_a_held_arm_is_left_running(
    chain: Any, people: tuple[list[Any], list[Any]]
) -> None:
    candidates, controls = people
    pk = start_experiment(candidates)
    received: list[dict[str, Any]] = []

    def listener(sender: Any, **kwargs: Any) -> None:
        received.append(kwargs)

    experiment_paused.connect(listener)
    try:
        for _ in range(2):  # 20 turns an arm: below EXPERIMENT_MIN_TURNS, never judged
            for user in [*candidates, *controls]:
                ask(user)
        guardrails.check_guardrails.enqueue(pk)
        run_queued_tasks()
        assert Experiment.objects.get(pk=pk).status == Experiment.Status.RUNNING
        for _ in range(5):
            for user in [*candidates, *controls]:
                ask(user)
        guardrails.check_guardrails.enqueue(pk)
        run_queued_tasks()
    finally:
        experiment_paused.disconnect(listener)
    assert Experiment.objects.get(pk=pk).status == Experiment.Status.PAUSED
    assert [(r["automatic"], r["experiment"].pk) for r in received] == [(True, pk)]
    assert "error_rate" in received[0]["reason"]


def test_the_sequential_test_holds_an_arm_within_its_bound() -> None:
    # Equal error rates: never tripped, whatever the number of looks.
    for n in (30, 100, 1000, 10_000):
        arm = control = rate_estimate(n // 20, n)
        trips, _ = beyond_bound(0.0, 2 * arm.se**2, 0.02, upper=True, tau=0.05, alpha=0.05)
        assert not trips
    # Just inside the bound (1.5 points more errors than allowed 2): not tripped either.
    arm, control = rate_estimate(65, 1000), rate_estimate(50, 1000)
    d, variance = arm.value - control.value, arm.se**2 + control.se**2
    assert not beyond_bound(d, variance, 0.02, upper=True, tau=0.05, alpha=0.05)[0]
    # 30 % against 0 % with a bound of 2 points: tripped within sixty turns an arm.
    arm, control = rate_estimate(18, 60), rate_estimate(0, 60)
    d, variance = arm.value - control.value, arm.se**2 + control.se**2
    assert beyond_bound(d, variance, 0.02, upper=True, tau=0.05, alpha=0.05)[0]
    # A lower bound trips only below it.
    assert not beyond_bound(0.3, variance, -0.05, upper=False, tau=0.05, alpha=0.05)[0]
