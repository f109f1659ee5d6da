"""Comparing evaluation runs (issue 22, "Compare"): a planted regression is flagged, the
aggregate delta has a reproducible bootstrap interval, and the API answers staff with the
view permission only."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Permission

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.compare import bootstrap_interval, compare_runs
from advisors_app.evaluation.runs import create_run, execute_run
from advisors_app.models import Dataset, EvalResult, EvalRun
from tests.api.conftest import client_for
from tests.eval_fixtures import make_dataset, make_versions

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs() -> tuple[EvalRun, EvalRun]:
    """Version 1 (production) and version 2 (staging) on the refunds dataset: v2 says
    "10 days, by bank transfer", so ``days`` regresses and ``bank`` improves."""
    clear_cache()
    make_versions()
    dataset = make_dataset()
    baseline = execute_run(create_run(dataset, "support").pk)
    candidate = execute_run(create_run(dataset, "support", label="staging").pk)
    clear_cache()
    assert baseline is not None and candidate is not None
    return baseline, candidate


def test_compare_flags_the_planted_regression(runs: tuple[EvalRun, EvalRun]) -> None:
    baseline, candidate = runs
    comparison = compare_runs(baseline, candidate)
    status = {item.key: item.status for item in comparison.items}
    assert status == {"days": "regressed", "bank": "improved", "followup": "unchanged"}
    days = next(item for item in comparison.items if item.key == "days")
    assert days.deltas == {"contains": -1.0} and days.regressed == ["contains"]
    score = comparison.scores["contains"]
    assert (score.baseline_mean, score.candidate_mean) == (pytest.approx(2 / 3),) * 2
    assert score.delta == 0.0 and score.paired == 3
    assert (score.regressed, score.improved, score.unchanged) == (1, 1, 1)
    assert score.ci_low is not None and score.ci_high is not None
    assert score.ci_low < 0 < score.ci_high
    assert comparison.counts() == {
        "regressed": 1,
        "improved": 1,
        "unchanged": 1,
        "only_baseline": 0,
        "only_candidate": 0,
    }
    # The same runs give the same interval (fixed seed).
    assert compare_runs(baseline, candidate).scores["contains"] == score


def test_items_of_one_run_only_and_failed_turns(runs: tuple[EvalRun, EvalRun]) -> None:
    baseline, candidate = runs
    EvalResult.objects.filter(run=candidate, item_key="followup").update(error="boom")
    EvalResult.objects.filter(run=baseline, item_key="bank").delete()
    comparison = compare_runs(baseline, candidate)
    assert comparison.only_candidate == ["bank"]
    followup = next(item for item in comparison.items if item.key == "followup")
    assert followup.status == "regressed" and followup.regressed == ["error"]


def test_the_bootstrap_interval() -> None:
    assert bootstrap_interval([]) is None
    assert bootstrap_interval([0.5, 0.5, 0.5]) == (0.5, 0.5)
    low, high = bootstrap_interval([-1.0] * 20 + [0.0] * 80)
    assert -0.4 < low < -0.2 < high < -0.1 + 0.1
    assert bootstrap_interval([1.0, 0.0, -1.0], seed=3) == bootstrap_interval(
        [1.0, 0.0, -1.0], seed=3
    )


def test_the_compare_api(runs: tuple[EvalRun, EvalRun], django_user_model: Any) -> None:
    baseline, candidate = runs
    url = f"/api/eval-runs/{baseline.pk}/compare/{candidate.pk}/"
    staff = django_user_model.objects.create_user("staff", password="pw", is_staff=True)
    user = django_user_model.objects.create_user("user", password="pw")
    # Anonymous: 401; a user, or staff without the permission: 403.
    from rest_framework.test import APIClient

    assert APIClient().get(url).status_code == 401
    for who in (user, staff):
        response = client_for(who).get(url)
        assert response.status_code == 403
        assert "advisors_app.view_evalrun" in response.json()["error"]["message"]
    staff.user_permissions.add(Permission.objects.get(codename="view_evalrun"))
    staff = django_user_model.objects.get(pk=staff.pk)
    api = client_for(staff)
    body = api.get(url).json()
    assert body["baseline"] == baseline.pk and body["candidate"] == candidate.pk
    assert body["counts"]["regressed"] == 1
    assert {i["key"]: i["status"] for i in body["items"]}["days"] == "regressed"
    assert body["scores"]["contains"]["delta"] == 0.0
    assert body["bootstrap"] == {"resamples": 2000, "seed": 0, "confidence": 0.95}
    missing = api.get(f"/api/eval-runs/{baseline.pk}/compare/999999/")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    itself = api.get(f"/api/eval-runs/{baseline.pk}/compare/{baseline.pk}/")
    assert itself.status_code == 400 and "not with itself" in str(itself.json())
    other = EvalRun.objects.get(pk=candidate.pk)
    other.pk = None
    other.dataset = Dataset.objects.create(slug="other", name="Other")
    other.save()
    mixed = api.get(f"/api/eval-runs/{baseline.pk}/compare/{other.pk}/")
    assert mixed.status_code == 400 and "another dataset" in str(mixed.json())
    EvalRun.objects.filter(pk=other.pk).update(dataset=baseline.dataset, status="running")
    running = api.get(f"/api/eval-runs/{baseline.pk}/compare/{other.pk}/")
    assert running.status_code == 409 and "has not finished" in str(running.json())
    Dataset.objects.filter(slug="other").delete()
    assert Dataset.objects.count() == 1
