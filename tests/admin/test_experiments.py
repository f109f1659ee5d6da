"""The experiment admin (issue 37): arms inline with the shared rules as form errors, start /
pause / stop actions, conclude from the change page, the per-arm results table."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.experiments.serving import clear_plans
from advisors_app.models import Experiment
from tests.experiment_helpers import make_experiment, two_version_chain
from tests.factories import make_chain

pytestmark = pytest.mark.django_db(transaction=True)

ADD = "/admin/advisors_app/experiment/add/"


@pytest.fixture(autouse=True)
def fresh(fresh_chain_cache: None) -> Iterator[None]:
    clear_plans()
    yield
    clear_plans()


def staff(django_user_model: Any, name: str, *codenames: str) -> Client:
    user = django_user_model.objects.create_user(name, password="pw", is_staff=True)
    user.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def runner(django_user_model: Any) -> Client:
    return staff(
        django_user_model,
        "runner",
        "run_experiment",
        "view_experiment",
        "change_chainlabel",
        "promote_production",
    )


def form(chain: Any, arms: list[tuple[str, int, int]], **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "chain": chain.pk,
        "name": "trial",
        "label": "production",
        "unit": "user",
        "guardrails": '[{"metric": "error_rate", "max": 0.02}]',
        "targeting": "[]",
        "ramp": "{}",
        "arms-TOTAL_FORMS": str(len(arms)),
        "arms-INITIAL_FORMS": "0",
        "arms-MIN_NUM_FORMS": "2",
        "arms-MAX_NUM_FORMS": "1000",
        **fields,
    }
    for at, (name, version_id, weight) in enumerate(arms):
        data.update(
            {
                f"arms-{at}-position": str(at),
                f"arms-{at}-name": name,
                f"arms-{at}-version": str(version_id),
                f"arms-{at}-weight": str(weight),
            }
        )
    return data


def test_create_with_arms_inline_and_form_errors(runner: Client) -> None:
    chain = two_version_chain("exp")
    v1, v2 = (chain.versions.get(number=n).pk for n in (1, 2))
    other = make_chain("other").versions.get().pk
    bad_sum = runner.post(ADD, form(chain, [("control", v1, 9000), ("b", v2, 900)]))
    assert bad_sum.status_code == 200
    assert "must sum to 10000" in bad_sum.content.decode()
    foreign = runner.post(ADD, form(chain, [("control", v1, 9000), ("b", other, 1000)]))
    assert "a version of another chain" in foreign.content.decode()
    metric = runner.post(
        ADD,
        form(
            chain,
            [("control", v1, 9000), ("b", v2, 1000)],
            guardrails='[{"metric": "x", "max": 1}]',
        ),
    )
    assert "Unknown metric" in metric.content.decode()
    assert Experiment.objects.count() == 0
    created = runner.post(ADD, form(chain, [("control", v1, 9000), ("b", v2, 1000)]))
    assert created.status_code == 302, created.content.decode()[:3000]
    experiment = Experiment.objects.get()
    assert [(a.name, a.version.number, a.weight) for a in experiment.arms.all()] == [
        ("control", 1, 9000),
        ("b", 2, 1000),
    ]


def test_actions_conclude_and_the_results_table(runner: Client, django_user_model: Any) -> None:
    chain = two_version_chain("exp")
    experiment = make_experiment(chain, status=Experiment.Status.DRAFT)
    changelist = "/admin/advisors_app/experiment/"
    runner.post(changelist, {"action": "start_selected", "_selected_action": [experiment.pk]})
    experiment.refresh_from_db()
    assert experiment.status == "running"
    from tests.api.conftest import client_for

    for n in range(6):
        user = django_user_model.objects.create_user(f"chatter{n}", password="pw")
        client_for(user).post("/api/chains/exp/call/", {"message": "hi"}, format="json")
    page = runner.get(f"/admin/advisors_app/experiment/{experiment.pk}/change/").content.decode()
    assert 'id="experiment-results"' in page and "(control)" in page
    assert "Conclude: treatment wins" in page
    assert 'aria-label="Turns a day"' in page and "<polyline" in page
    runner.post(changelist, {"action": "pause_selected", "_selected_action": [experiment.pk]})
    experiment.refresh_from_db()
    assert experiment.status == "paused"
    done = runner.post(
        f"/admin/advisors_app/experiment/{experiment.pk}/conclude/", {"winner": "treatment"}
    )
    assert done.status_code == 302
    experiment.refresh_from_db()
    assert (experiment.status, experiment.winner) == ("concluded", "treatment")
    assert chain.labels.get(name="production").version.number == 2


def test_without_run_experiment_nothing_is_written(django_user_model: Any) -> None:
    chain = two_version_chain("exp")
    viewer = staff(django_user_model, "viewer", "view_experiment")
    experiment = make_experiment(chain, status=Experiment.Status.DRAFT)
    assert viewer.get(ADD).status_code == 403
    v1, v2 = (chain.versions.get(number=n).pk for n in (1, 2))
    assert (
        viewer.post(ADD, form(chain, [("control", v1, 5000), ("b", v2, 5000)])).status_code == 403
    )
    viewer.post(
        f"/admin/advisors_app/experiment/{experiment.pk}/conclude/", {"winner": "treatment"}
    )
    experiment.refresh_from_db()
    assert experiment.status == "draft"
    assert chain.labels.get(name="production").version.number == 1
