"""The gate does not flip (issue 40): on the real embedded model (SmolLM2-135M through
llama.cpp), the gate of a version against itself passes 20 times out of 20, every time on two
fresh runs, and a deliberately worse version fails.

The runs pin temperature 0 and a seed (the default), so the same version gives the same
answers; the verdict rests on the interval of the per-item differences, which is [0, 0] then.
Before, the model sampled at its default temperature (0.2) and the gate judged a count of
regressed items, so one answer that came out differently failed it. Five questions the model
answers right in one short sentence, 24 tokens at most: 20 gates × 2 runs × 5 items are 200
short turns, about six minutes of CPU (twelve on a two-core machine busy with other work).
Unpinned, the same gates failed about one time in four (2 of 8 in a trial), so 20 of 20 would
not pass by luck.
"""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.definition import move_label, publish
from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.datasets import import_items, parse_items
from advisors_app.evaluation.gate import run_gate
from advisors_app.models import ChatModelConfig, Dataset, EvalRun
from tests.factories import make_chain

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

GATES = 20
QUESTIONS = {
    "france": ("What is the capital of France?", "Paris"),
    "ocean": ("What is the largest ocean on Earth?", "Pacific"),
    "week": ("How many days are in a week?", "7"),
    "hot": ("What is the opposite of hot?", "cold"),
    "spain": ("What language is spoken in Spain?", "Spanish"),
}


@pytest.fixture
def quiz() -> Any:
    """Chain ``quiz`` on the embedded model: version 1 (production) answers in one short
    sentence; version 2 (``cut``) is the same but stops after two tokens, too few for any
    answer to name its fact."""
    clear_cache()
    model = ChatModelConfig.objects.create(
        slug="smol", provider="embedded", options={"max_tokens": 24}, timeout=600
    )
    chain = make_chain("quiz", model=model, system_prompt="Answer in one short sentence.")
    chain.default_options = {"max_tokens": 2}
    chain.save()
    cut, _ = publish(chain, message="answers cut after two tokens")
    move_label(chain, "cut", cut)
    dataset = Dataset.objects.create(slug="quiz")
    items = [
        {"key": key, "input": {"message": message}, "expected": {"output": fact}}
        for key, (message, fact) in QUESTIONS.items()
    ]
    import_items(dataset, parse_items(items))
    yield dataset
    clear_cache()


@pytest.mark.timeout(3600)
def test_a_version_against_itself_passes_20_times_of_20_and_a_worse_one_fails(
    quiz: Dataset,
) -> None:
    verdicts = []
    for _ in range(GATES):
        result = run_gate(quiz, "quiz", candidate="production", baseline="production", reuse=False)
        verdicts.append((result.passed, result.reasons))
    assert verdicts == [(True, [])] * GATES
    runs = EvalRun.objects.filter(version_number=1)
    assert runs.count() == 2 * GATES
    # Every run answered alike (pinned), and right often enough that a version passing
    # nothing is worse (which question the model misses can differ from one build to another:
    # "the opposite of hot is cool").
    answers = {r.item_key: r.output for r in runs.first().results.all()}
    rates = {run.summary["evaluators"]["contains"]["pass_rate"] for run in runs}
    assert len(rates) == 1 and min(rates) >= 0.6, (rates, answers)
    [baseline_rate] = rates
    assert {run.summary["errors"] for run in runs} == {0}

    worse = run_gate(quiz, "quiz", candidate="cut", baseline="production")
    assert not worse.passed
    assert worse.reused == ["baseline"]
    assert worse.candidate.summary["evaluators"]["contains"]["pass_rate"] == 0.0
    [verdict] = worse.verdicts
    assert verdict.key == "contains"
    assert verdict.delta == pytest.approx(-baseline_rate) and verdict.high < -0.05
    [reason] = worse.reasons
    assert reason.startswith("contains: mean difference -") and "(5 items)" in reason
    assert reason.endswith("below -0.0500: it may be worse by more than the margin")
