"""``llm_judge`` on the scripted chat model: a verdict is validated and retried, and a judge
that never gives a valid one scores ``"invalid"`` — never a number."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from advisors_app.core import ChatModel, ChatResponse, Prompt, ScriptedChatModel
from advisors_app.core.exceptions import ContextOverflowError, ProviderUnavailableError
from advisors_app.core.messages import MessageType
from advisors_app.evaluation.evaluators import (
    INVALID,
    EvalScore,
    Evaluator,
    EvaluatorParamsError,
    evaluator_registry,
)

from .helpers import case

RUBRIC = "5: correct and complete. 3: partly correct. 1: wrong or off-topic."
PARIS = case("Paris is the capital of France.", {"output": "Paris"})
RETRY = "Output JSON validation failed because of: "


class Models:
    """Evaluator services that always answer with one model (and count the lookups)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model
        self.asked: list[str | None] = []

    async def chat_model(self, slug: str | None) -> ChatModel:
        self.asked.append(slug)
        return self.model


def build_judge(chat_model: ChatModel, /, **params: Any) -> tuple[Evaluator, Models]:
    models = Models(chat_model)
    params = {"rubric": RUBRIC, **params}
    return evaluator_registry.build("llm_judge", params, services=models), models


def user_texts(model: ScriptedChatModel) -> list[str]:
    return [p.user_message.text for p in model.prompts]


def assert_not_numeric(score: EvalScore) -> None:
    assert score.value == INVALID and isinstance(score.value, str)
    assert score.passed is None
    assert score.comment.startswith("judge gave no valid verdict: ")


async def test_a_valid_verdict_is_normalised_and_passed_on_the_rubric_scale() -> None:
    model = ScriptedChatModel(['{"score": 4, "reason": "Correct, a little terse."}'])
    judge, models = build_judge(model, pass_threshold=4, model="judge-model")
    assert await judge.evaluate(PARIS) == EvalScore(
        "llm_judge", 0.75, True, "4 on 1–5: Correct, a little terse."
    )
    assert models.asked == ["judge-model"]
    [prompt] = model.prompts
    assert RUBRIC in prompt.system_message.text and '"score": <integer from 1 to 5>' in (
        prompt.system_message.text
    )
    assert prompt.user_message.text == (
        "QUESTION:\nWhat is the capital of France?\n\nREFERENCE ANSWER:\nParis\n\n"
        "ANSWER:\nParis is the capital of France."
    )
    # Constrained decoding: the verdict's schema goes to the model as response_format.
    schema = prompt.options.response_format["json_schema"]["schema"]
    assert schema["properties"]["score"] == {"type": "integer", "minimum": 1, "maximum": 5}
    assert (prompt.options.temperature, prompt.options.max_tokens) == (0, 200)


async def test_invalid_then_valid_json_gives_the_valid_score_after_a_retry() -> None:
    model = ScriptedChatModel(["I would say 4 out of 5.", '{"score": 2, "reason": "Vague."}'])
    judge, _ = build_judge(model)
    score = await judge.evaluate(PARIS)
    assert score == EvalScore("llm_judge", 0.25, None, "2 on 1–5, after 2 attempts: Vague.")
    first, retry = user_texts(model)
    assert retry.startswith(first + "\n" + RETRY + "Invalid JSON: ")


@pytest.mark.parametrize(
    "bad",
    [
        '{"score": 9, "reason": "Excellent!"}',  # above the scale
        '{"score": 0, "reason": "Bad."}',  # below it
        '{"score": 3.5, "reason": "Between."}',  # not an integer
        '{"score": "4", "reason": "As text."}',
        '{"score": true, "reason": "Yes."}',
        '{"score": NaN, "reason": "Unsure."}',  # passes any minimum/maximum check
        '{"score": Infinity, "reason": "Huge."}',
        '{"reason": "No score."}',
        '{"score": 4, "reason": "Fine.", "confidence": 0.9}',
        '{"score": 4, "reason": "' + "very " * 100 + 'long."}',
    ],
)
async def test_each_kind_of_bad_verdict_is_retried(bad: str) -> None:
    model = ScriptedChatModel([bad, '{"score": 5, "reason": "Right."}'])
    judge, _ = build_judge(model)
    assert (await judge.evaluate(PARIS)).value == 1.0
    assert user_texts(model)[1].count(RETRY) == 1


async def test_garbage_every_time_stores_no_number() -> None:
    model = ScriptedChatModel(["Four."], repeat=True)
    judge, _ = build_judge(model, pass_threshold=3)
    score = await judge.evaluate(PARIS)
    assert_not_numeric(score)
    assert len(model.prompts) == 4  # the first answer and max_repeat_attempts (3) retries
    assert "after 4 attempt(s)" in score.comment and "'Four.'" in score.comment


@pytest.mark.parametrize(
    "bad", ['{"score": 6, "reason": "Great."}', '{"score": NaN, "reason": "?"}', "```json\n{"]
)
async def test_a_judge_out_of_range_every_time_stores_no_number(bad: str) -> None:
    model = ScriptedChatModel([bad], repeat=True)
    judge, _ = build_judge(model, max_repeat_attempts=1)
    assert_not_numeric(await judge.evaluate(PARIS))
    assert len(model.prompts) == 2


async def test_a_fractional_scale_without_normalisation() -> None:
    model = ScriptedChatModel(['{"score": 7.5, "reason": "Good."}'])
    judge, _ = build_judge(
        model, scale_min=0, scale_max=10, integer_scores=False, normalize=False, pass_threshold=8
    )
    assert await judge.evaluate(PARIS) == EvalScore("llm_judge", 7.5, False, "7.5 on 0–10: Good.")
    schema = model.prompts[0].options.response_format["json_schema"]["schema"]
    assert schema["properties"]["score"]["type"] == "number"


async def test_unconstrained_sends_no_response_format() -> None:
    model = ScriptedChatModel(['{"score": 1, "reason": "Wrong."}'])
    judge, _ = build_judge(model, constrained=False, key="accuracy")
    assert await judge.evaluate(PARIS) == EvalScore("accuracy", 0.0, None, "1 on 1–5: Wrong.")
    assert model.prompts[0].options.response_format is None


async def test_the_model_is_resolved_once_and_kept() -> None:
    model = ScriptedChatModel(['{"score": 3, "reason": "Partly."}'], repeat=True)
    judge, models = build_judge(model)
    for _ in range(3):
        assert (await judge.evaluate(PARIS)).value == 0.5
    assert models.asked == [None]  # the default chat model


class Failing:
    """A chat model whose every call fails as ``error`` says."""

    default_options = None

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def call(self, prompt: Prompt) -> ChatResponse:
        raise self.error

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        raise self.error
        yield  # pragma: no cover


@pytest.mark.parametrize(
    "error",
    [
        ProviderUnavailableError("503 from the judge", status=503),
        ContextOverflowError(5000, 3896, 4096, 200),
    ],
)
async def test_a_failing_judge_model_stores_no_number(error: Exception) -> None:
    judge, _ = build_judge(Failing(error))  # type: ignore[arg-type]
    score = await judge.evaluate(PARIS)
    assert_not_numeric(score)
    assert f"the judge model failed: {type(error).__name__}" in score.comment


async def test_the_case_without_a_reference_answer_is_judged_from_the_question() -> None:
    model = ScriptedChatModel(['{"score": 5, "reason": "Fine."}'])
    judge, _ = build_judge(model)
    await judge.evaluate(case("Hello!", message="Say hello."))
    [prompt] = model.prompts
    assert prompt.user_message.text == "QUESTION:\nSay hello.\n\nANSWER:\nHello!"
    assert [m.message_type for m in prompt.instructions] == [MessageType.SYSTEM, MessageType.USER]


# --- model resolution from the database ----------------------------------------------------

pytest_db = pytest.mark.django_db(transaction=True)


@pytest_db
async def test_the_model_param_names_a_chat_model_configuration() -> None:
    from advisors_app.models import ChatModelConfig

    await ChatModelConfig.objects.acreate(
        slug="strict-judge",
        provider="scripted",
        settings={"responses": ["no idea", '{"score": 5, "reason": "Exactly right."}']},
    )
    judge = evaluator_registry.build("llm_judge", {"rubric": RUBRIC, "model": "strict-judge"})
    assert await judge.evaluate(PARIS) == EvalScore(
        "llm_judge", 1.0, None, "5 on 1–5, after 2 attempts: Exactly right."
    )


@pytest_db
async def test_a_settings_alias_and_the_default_alias_are_found_too(settings: Any) -> None:
    from advisors_app.conf import app_settings
    from advisors_app.models import ChatModelConfig

    settings.ADVISORS = {
        **settings.ADVISORS,
        "CHAT_MODELS": {
            "judge-alias": {"provider": "scripted", "responses": ['{"score": 2, "reason": "Hm."}']}
        },
    }
    by_alias = evaluator_registry.build("llm_judge", {"rubric": RUBRIC, "model": "judge-alias"})
    assert (await by_alias.evaluate(PARIS)).value == 0.25
    # No model: the default alias, where a configuration row with its slug wins (as for chains).
    await ChatModelConfig.objects.acreate(
        slug=app_settings.DEFAULT_CHAT_MODEL,
        provider="scripted",
        settings={"responses": ['{"score": 3, "reason": "Default."}']},
    )
    default = evaluator_registry.build("llm_judge", {"rubric": RUBRIC})
    assert (await default.evaluate(PARIS)).comment == "3 on 1–5: Default."


@pytest_db
async def test_an_unknown_model_is_a_params_error_at_the_first_evaluation() -> None:
    judge = evaluator_registry.build("llm_judge", {"rubric": RUBRIC, "model": "no-such-model"})
    with pytest.raises(EvaluatorParamsError) as raised:
        await judge.evaluate(PARIS)
    [message] = raised.value.errors["params.model"]
    assert message.startswith("No chat model 'no-such-model': no chat-model configuration")
    assert "smollm2-135m-instruct" in message
