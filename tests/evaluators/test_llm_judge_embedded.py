"""``llm_judge`` on the real embedded model (SmolLM2-135M through llama.cpp): never an invalid
or out-of-range number.

Constrained decoding (the default) makes the tiny judge answer a verdict in the schema's
bounds; unconstrained, it rarely writes JSON at all, and then the score is ``"invalid"`` —
either way no made-up number is stored. Its grading itself is poor (in a trial it gave the
correct answer 1 of 5 and the wrong one 4): only the form of the verdict is under
test, not its judgement. Few cases: each call takes seconds on two cores.
"""

from __future__ import annotations

import re

import pytest

from advisors_app.evaluation.evaluators import INVALID, EvalScore, evaluator_registry

from .helpers import case

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

RUBRIC = "5: the answer is correct and complete. 3: partly correct. 1: wrong or off-topic."
CASES = (
    case("Paris is the capital of France.", {"output": "Paris"}),
    case("Bananas are yellow.", {"output": "4"}, message="What is 2 + 2?"),
)
VERDICT = re.compile(r"^(?P<score>-?\d+(\.\d+)?) on 1–5(, after \d+ attempts)?: ")


def assert_in_range(score: EvalScore) -> None:
    assert isinstance(score.value, float) and 0.0 <= score.value <= 1.0, score
    assert isinstance(score.passed, bool), score
    found = VERDICT.match(score.comment)
    assert found and 1 <= float(found["score"]) <= 5, score
    assert float(found["score"]) == 1 + 4 * score.value


async def test_the_embedded_judge_gives_bounded_verdicts_or_none() -> None:
    from advisors_app.models import ChatModelConfig

    await ChatModelConfig.objects.acreate(slug="smol-judge", provider="embedded", timeout=600)
    params = {"rubric": RUBRIC, "model": "smol-judge", "pass_threshold": 3}
    constrained = evaluator_registry.build("llm_judge", params)
    for eval_case in CASES:
        assert_in_range(await constrained.evaluate(eval_case))
    # Free-form, the same model seldom answers JSON: whatever it says, no invalid number.
    free = evaluator_registry.build(
        "llm_judge", {**params, "constrained": False, "max_repeat_attempts": 1, "max_tokens": 48}
    )
    score = await free.evaluate(CASES[0])
    if score.value == INVALID:
        assert score.passed is None and score.comment.startswith("judge gave no valid verdict: ")
    else:
        assert_in_range(score)
