"""Runs that repeat their items (issue 40, "A gate that does not flip"): an item's score is the
mean of its repeats, compared item by item, with the interval over items."""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.definition import move_label, publish
from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.compare import compare_runs
from advisors_app.evaluation.runs import create_run, execute_run
from advisors_app.models import AdvisorChain, EvalResult, EvalRun
from tests.eval_fixtures import make_dataset
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs() -> tuple[EvalRun, EvalRun]:
    """Twice each item: version 1 answers right then wrong, in turn; version 2 always right
    on ``days``."""
    clear_cache()
    make_chain(model=scripted_model("flaky", ("Refunds take 5 days.", "No idea.")))
    chain = AdvisorChain.objects.get(slug="support")
    chain.chat_model = scripted_model("steady", ("Refunds take 5 days.",))
    chain.save()
    version, _ = publish(chain, message="steady")
    move_label(chain, "staging", version)
    dataset = make_dataset()
    baseline = execute_run(create_run(dataset, "support", repeats=2).pk)
    candidate = execute_run(create_run(dataset, "support", label="staging", repeats=2).pk)
    clear_cache()
    assert baseline is not None and candidate is not None
    return baseline, candidate


def test_an_items_repeats_are_averaged_before_they_are_compared(
    runs: tuple[EvalRun, EvalRun],
) -> None:
    baseline, candidate = runs
    passed = {
        (r.item_key, r.repeat): r.scores["contains"]["passed"] for r in baseline.results.all()
    }
    assert passed == {
        ("bank", 0): False,
        ("bank", 1): False,
        ("days", 0): True,
        ("days", 1): False,
        ("followup", 0): True,
        ("followup", 1): False,
    }
    comparison = compare_runs(baseline, candidate)
    days = next(item for item in comparison.items if item.key == "days")
    assert days.status == "improved" and days.deltas == {"contains": 0.5}
    assert days.baseline["contains"] == {
        "value": 0.5,
        "passed": False,
        "comment": "2 repeats, 1 of 2 judged passed",
    }
    assert days.candidate["contains"]["passed"] is True
    score = comparison.scores["contains"]
    # Means over every result; the paired deltas are per item (0, +0.5, +0.5).
    assert (score.baseline_mean, score.candidate_mean) == (
        pytest.approx(2 / 6),
        pytest.approx(4 / 6),
    )
    assert score.paired == 3 and score.delta == pytest.approx(1 / 3)
    assert score.ci_low == 0.0 and score.ci_high == 0.5
    assert (score.baseline_pass_rate, score.candidate_pass_rate) == (
        pytest.approx(2 / 6),
        pytest.approx(4 / 6),
    )


def test_a_turn_failing_in_more_repeats_is_a_regression(runs: tuple[EvalRun, EvalRun]) -> None:
    baseline, candidate = runs
    EvalResult.objects.filter(run=candidate, item_key="bank", repeat=1).update(error="boom")
    bank = next(item for item in compare_runs(baseline, candidate).items if item.key == "bank")
    assert bank.status == "regressed" and bank.regressed == ["error"]
    assert bank.candidate_error == "boom"


def test_a_run_with_repeats_is_shown_per_repeat(
    runs: tuple[EvalRun, EvalRun], admin_client: Any
) -> None:
    baseline, candidate = runs
    result = EvalResult.objects.get(run=baseline, item_key="days", repeat=1)
    assert str(result) == f"days (repeat 1) in run {baseline.pk}"
    page = admin_client.get(f"/admin/advisors_app/evalrun/{baseline.pk}/compare/{candidate.pk}/")
    assert page.status_code == 200
    assert "0.5 → 1.0" in page.content.decode()
