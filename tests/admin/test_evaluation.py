"""Admin of evaluation (issue 22): a dataset's current items, starting a run (enqueued, run by
the worker loop), a run's progress and results, and two runs compared (table and chart)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.datasets import import_items, parse_items
from advisors_app.models import EvalRun
from tests.eval_fixtures import ITEMS, make_dataset, make_versions
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_chains() -> Any:
    clear_cache()
    yield
    clear_cache()


def test_a_dataset_shows_its_current_items_only(admin_client: Client) -> None:
    make_versions()
    dataset = make_dataset()
    edited = json.loads(json.dumps(ITEMS))
    edited[0]["input"]["message"] = "How many days do refunds take?"
    import_items(dataset, parse_items(edited))
    page = admin_client.get(f"/admin/advisors_app/dataset/{dataset.pk}/change/").content.decode()
    assert "How many days do refunds take?" in page
    assert "How long do refunds take?" not in page
    listing = admin_client.get("/admin/advisors_app/dataset/").content.decode()
    assert ">3<" in listing  # current items, not the 4 rows


def test_run_an_evaluation_from_the_admin_then_compare(admin_client: Client) -> None:
    make_versions()
    dataset = make_dataset()
    run_url = f"/admin/advisors_app/dataset/{dataset.pk}/run/"
    assert "Run evaluation" in admin_client.get(run_url).content.decode()
    refused = admin_client.post(run_url, {"chain": "support", "target": "qa", "evaluators": ""})
    assert "has no label &#x27;qa&#x27;" in refused.content.decode()
    assert not EvalRun.objects.exists()
    for target in ("production", "staging"):
        response = admin_client.post(
            run_url, {"chain": "support", "target": target, "evaluators": ""}
        )
        assert response.status_code == 302
    assert run_queued_tasks() == 2
    baseline, candidate = EvalRun.objects.order_by("pk")
    assert (baseline.status, candidate.status) == ("done", "done")
    page = admin_client.get(f"/admin/advisors_app/evalrun/{candidate.pk}/change/").content
    text = page.decode()
    assert "3/3" in text and "contains: mean 0.667" in text
    compare = f"/admin/advisors_app/evalrun/{baseline.pk}/compare/{candidate.pk}/"
    assert compare in text
    page = admin_client.get(compare).content.decode()
    assert "1 regressed" in page and "1 improved" in page
    assert 'id="eval-compare-data"' in page and "chart.umd.min.js" in page
    assert page.index(">days<") < page.index(">bank<")  # regressions first


def test_run_again_and_permissions(admin_client: Client, django_user_model: Any) -> None:
    make_versions()
    dataset = make_dataset()
    admin_client.post(
        f"/admin/advisors_app/dataset/{dataset.pk}/run/",
        {"chain": "support", "target": "1", "evaluators": '[{"key": "exact"}]'},
    )
    run = EvalRun.objects.get()
    assert (run.version_asked, run.evaluators) == ("1", [{"key": "exact"}])
    admin_client.post(
        "/admin/advisors_app/evalrun/",
        {"action": "run_again", "_selected_action": [run.pk]},
    )
    assert EvalRun.objects.filter(version_asked="1", evaluators=[{"key": "exact"}]).count() == 2
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_evalrun"))
    client = Client()
    client.force_login(viewer)
    assert client.get(f"/admin/advisors_app/dataset/{dataset.pk}/run/").status_code == 403
    assert client.get(f"/admin/advisors_app/evalrun/{run.pk}/compare/{run.pk}/").status_code == 200


def test_the_promote_page_shows_the_candidates_runs(admin_client: Client) -> None:
    from advisors_app.evaluation.runs import create_run, execute_run

    chain = make_versions()
    dataset = make_dataset()
    url = f"/admin/advisors_app/advisorchain/{chain.pk}/promote/?label=production&version=2"
    page = admin_client.get(url).content.decode()
    assert "No finished evaluation run of" in page
    candidate = execute_run(create_run(dataset, "support", label="staging").pk)
    assert candidate is not None
    page = admin_client.get(url).content.decode()
    assert f"Run {candidate.pk}</a> of" in page and "contains 0.667 pass rate" in page
    assert "No finished run of" in page  # production's version has no run on the dataset
    baseline = execute_run(create_run(dataset, "support").pk)
    assert baseline is not None
    page = admin_client.get(url).content.decode()
    assert "1 regressed, 1 improved, 1 unchanged" in page and "— worse" in page
    assert f"/admin/advisors_app/evalrun/{baseline.pk}/compare/{candidate.pk}/" in page
