"""Ramps (issue 37): the candidates' share grows a step at a time while the guardrails hold,
stays at the last step, and a tripped guardrail stops it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from advisors_app.experiments import guardrails
from advisors_app.experiments.ramps import effective_weights, ramp_errors
from advisors_app.experiments.serving import clear_plans
from advisors_app.models import CallLog, Experiment, ExperimentEvent
from tests.api.conftest import client_for
from tests.experiment_helpers import make_experiment, two_version_chain
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_effective_weights_follow_the_step() -> None:
    ramp = {"steps": [100, 500, 5000], "min_turns": 10}
    assert effective_weights([5000, 5000], ramp, 0) == [9900, 100]
    assert effective_weights([5000, 5000], ramp, 2) == [5000, 5000]
    assert effective_weights([5000, 5000], ramp, 9) == [5000, 5000]  # stays at the last
    assert effective_weights([4000, 3000, 3000], ramp, 1) == [9500, 250, 250]
    assert effective_weights([9000, 1000], {}, 0) == [9000, 1000]


def test_ramp_values_are_checked() -> None:
    assert ramp_errors({}) == []
    assert ramp_errors({"steps": [100, 500], "min_turns": 5}) == []
    assert ramp_errors({"steps": [500, 100]})
    assert ramp_errors({"steps": [100, 10_000]})
    assert ramp_errors({"steps": [100], "min_turns": 0})
    assert ramp_errors({"steps": [100], "speed": 1})


@pytest.fixture(autouse=True)
def fresh(fresh_chain_cache: None) -> Iterator[None]:
    clear_plans()
    yield
    clear_plans()


def turns(users: list[Any], rounds: int) -> None:
    for _ in range(rounds):
        for user in users:
            client_for(user).post("/api/chains/exp/call/", {"message": "hi"}, format="json")


@override_settings(ADVISORS={"EXPERIMENT_CHECK_TURNS": 100_000, "CHAT_THROTTLE_RATE": ""})
def test_a_ramp_advances_while_guardrails_hold_and_stops_at_its_last_step(
    django_user_model: Any,
) -> None:
    chain = two_version_chain("exp")
    users = [django_user_model.objects.create_user(f"u{n}", password="pw") for n in range(40)]
    experiment = make_experiment(
        chain,
        guardrails=[{"metric": "error_rate", "max": 0.02}],
        # One turn per arm is enough to advance: which users land on the treatment follows
        # their ids, which differ with the tests that ran before; a larger minimum was missed
        # once in a full run (4 of 40 users on the treatment).
        ramp={"steps": [2500, 5000], "min_turns": 1},
    )
    Experiment.objects.filter(pk=experiment.pk).update(started_at=experiment.created_at)
    turns(users, 1)
    shares = CallLog.objects.filter(experiment=experiment)
    first = shares.filter(experiment_arm="treatment").count()
    assert 0 < first < 20  # a quarter of 40 users, give or take
    guardrails.check_guardrails.enqueue(experiment.pk)
    run_queued_tasks()
    experiment.refresh_from_db()
    assert experiment.ramp_step == 1
    event = ExperimentEvent.objects.get(experiment=experiment, detail__ramp_step=1)
    assert "candidates at 50 %" in event.reason
    # Users on the treatment stay there as the share grows.
    CallLog.objects.all().delete()
    turns(users, 1)
    assert shares.filter(experiment_arm="treatment").count() >= first
    guardrails.check_guardrails.enqueue(experiment.pk)
    run_queued_tasks()
    experiment.refresh_from_db()
    assert experiment.ramp_step == 1  # the last step: it stays


@override_settings(ADVISORS={"EXPERIMENT_CHECK_TURNS": 100_000, "CHAT_THROTTLE_RATE": ""})
def test_a_tripped_guardrail_stops_the_ramp(django_user_model: Any) -> None:
    from advisors_app.definition import publish
    from tests.factories import make_chain, scripted_model

    # Version 2's model fails every call.
    chain = make_chain("exp", model=scripted_model("exp-one", responses=("one",)))
    chain.chat_model = scripted_model("exp-broken", responses=[{"error": "boom"}])
    chain.save()
    publish(chain, message="broken")
    users = [django_user_model.objects.create_user(f"u{n}", password="pw") for n in range(30)]
    experiment = make_experiment(
        chain,
        (("control", 1, 5000), ("treatment", 2, 5000)),
        guardrails=[{"metric": "error_rate", "max": 0.02}],
        ramp={"steps": [5000, 9000], "min_turns": 5},
    )
    turns(users, 3)
    with override_settings(ADVISORS={"EXPERIMENT_MIN_TURNS": 5, "EXPERIMENT_CHECK_TURNS": 100_000}):
        guardrails.check(Experiment.objects.get(pk=experiment.pk))
    experiment.refresh_from_db()
    assert (experiment.status, experiment.ramp_step) == ("paused", 0)
