"""``llm_judge``: a chat model grades the answer against a rubric, with a checked verdict.

The judge is asked for ``{"score": number, "reason": string}`` through a ``ChatClient`` whose
only advisor is our :class:`~advisors_app.core.advisors.structured_output_validation.
StructuredOutputValidationAdvisor`: the verdict's JSON Schema bounds ``score`` to
``[scale_min, scale_max]`` (an integer by default) and caps ``reason``; an answer that is no
JSON (NaN and Infinity are not) or breaks the schema is sent back with the error, up to
``max_repeat_attempts`` more times. With ``constrained`` (the default) the schema also goes to
the model as ``response_format``, so llama.cpp's embedded SmolLM2 decodes under a grammar
(which bounds integers, not fractional numbers: those rely on the retries).

**No number is ever made up.** When every attempt failed — or the model call itself failed
(a provider error, a prompt over the context window, a budget) — the score is
``EvalScore(value="invalid", passed=None, comment="judge gave no valid verdict: ...")``: a
categorical :data:`~advisors_app.evaluation.evaluators.base.INVALID`, never a numeric value, so
means and pass rates leave the case out rather than count a guess.

A valid verdict's ``value`` is the score normalised to [0, 1] (``(score - min) / (max -
min)``; ``normalize=false`` keeps the rubric's scale); ``passed`` is ``score >=
pass_threshold`` (on the rubric's scale) when a threshold is given, else ``None``; the
comment holds the raw score and the judge's reason.

The model is ``params.model``: a chat-model configuration's slug, else a settings alias
(:class:`~advisors_app.evaluation.evaluators.services.DjangoEvaluatorServices`), resolved at the
first evaluation and then kept; an unknown one raises
:class:`~advisors_app.evaluation.evaluators.registry.EvaluatorParamsError` (``params.model``) there.
The judge's calls go through the case's ``meter`` when it has one: an evaluation run's judge
is priced, held to the run user's budgets and added to the evaluated turn's call log
(:mod:`advisors_app.costs.side_calls`); a budget that refuses it makes the score
:data:`~advisors_app.evaluation.evaluators.base.INVALID`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from advisors_app.core.advisors.structured_output_validation import (
    STRUCTURED_OUTPUT_ATTEMPTS,
    STRUCTURED_OUTPUT_ERROR,
    STRUCTURED_OUTPUT_VALID,
    StructuredOutputValidationAdvisor,
)
from advisors_app.core.client import ChatClient
from advisors_app.core.exceptions import (
    BudgetExceededError,
    ContextOverflowError,
    ProviderError,
)
from advisors_app.core.metering import MODEL_CALL_METER
from advisors_app.core.model import ChatModel
from advisors_app.core.prompt import ChatOptions
from advisors_app.core.structured import parse_json_output

from .base import INVALID, BaseEvaluator, EvalCase, EvalScore
from .registry import EvaluatorSpec, EvaluatorType, object_schema

__all__ = ["REASON_MAX_CHARS", "TYPES", "LlmJudgeEvaluator", "verdict_schema"]

#: Longest ``reason`` the verdict schema allows (a grammar then has to close the string).
REASON_MAX_CHARS = 400

SYSTEM_PROMPT = (
    "You are a strict grader. Grade the ANSWER against the RUBRIC.\n"
    "RUBRIC:\n{rubric}\n\n"
    'Reply with only a JSON object: {{"score": <{kind} from {low} to {high}>, '
    '"reason": "<one short sentence>"}}.'
)


def verdict_schema(scale_min: float, scale_max: float, *, integer: bool = True) -> dict[str, Any]:
    """The JSON Schema of a verdict: ``score`` in ``[scale_min, scale_max]``, a ``reason``."""
    return {
        "type": "object",
        "properties": {
            "score": {
                "type": "integer" if integer else "number",
                "minimum": scale_min,
                "maximum": scale_max,
            },
            "reason": {"type": "string", "maxLength": REASON_MAX_CHARS},
        },
        "required": ["score", "reason"],
        "additionalProperties": False,
    }


def _number(value: float) -> str:
    return f"{value:g}"


class LlmJudgeEvaluator(BaseEvaluator):
    """Grades the answer with a chat model and a rubric (see the module docstring)."""

    __slots__ = (
        "_client",
        "_resolve_model",
        "constrained",
        "integer_scores",
        "max_tokens",
        "model",
        "normalize",
        "pass_threshold",
        "rubric",
        "scale_max",
        "scale_min",
        "schema",
        "temperature",
        "validation",
    )

    def __init__(
        self,
        key: str,
        rubric: str,
        resolve_model: Callable[[str | None], Awaitable[ChatModel]],
        *,
        scale_min: float = 1,
        scale_max: float = 5,
        integer_scores: bool = True,
        pass_threshold: float | None = None,
        model: str | None = None,
        max_repeat_attempts: int = 3,
        temperature: float = 0.0,
        max_tokens: int = 200,
        constrained: bool = True,
        normalize: bool = True,
    ) -> None:
        super().__init__(key)
        self.rubric = rubric
        self.scale_min = scale_min
        self.scale_max = scale_max
        self.integer_scores = integer_scores
        self.pass_threshold = pass_threshold
        self.model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.constrained = constrained
        self.normalize = normalize
        self.schema = verdict_schema(scale_min, scale_max, integer=integer_scores)
        self.validation = StructuredOutputValidationAdvisor(
            output_json_schema=self.schema, max_repeat_attempts=max_repeat_attempts
        )
        self._resolve_model = resolve_model
        self._client: ChatClient | None = None

    def system_prompt(self) -> str:
        return SYSTEM_PROMPT.format(
            rubric=self.rubric.strip(),
            kind="integer" if self.integer_scores else "number",
            low=_number(self.scale_min),
            high=_number(self.scale_max),
        )

    def user_prompt(self, case: EvalCase) -> str:
        """The case as the judge sees it: question, reference answer (if any), answer."""
        parts = [f"QUESTION:\n{case.input.get('message', '')}"]
        expected = case.expected.get("output")
        if isinstance(expected, str) and expected.strip():
            parts.append(f"REFERENCE ANSWER:\n{expected}")
        parts.append(f"ANSWER:\n{case.output}")
        return "\n\n".join(parts)

    def options(self) -> ChatOptions:
        response_format = None
        if self.constrained:
            response_format = {
                "type": "json_schema",
                "json_schema": {"name": "verdict", "schema": self.schema, "strict": True},
            }
        return ChatOptions(
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            response_format=response_format,
        )

    async def client(self) -> ChatClient:
        """The judge's client, its model resolved at the first call and kept."""
        if self._client is None:
            model = await self._resolve_model(self.model)
            self._client = ChatClient(model, default_advisors=[self.validation])
        return self._client

    def invalid(self, why: str) -> EvalScore:
        """The score of a case without a valid verdict: :data:`INVALID`, no pass/fail."""
        return self.score(INVALID, None, f"judge gave no valid verdict: {why}")

    async def evaluate(self, case: EvalCase) -> EvalScore:
        client = await self.client()
        spec = (
            client.prompt()
            .system(self.system_prompt())
            .user(self.user_prompt(case))
            .options(self.options())
        )
        if case.meter is not None:
            spec = spec.advisor_param(MODEL_CALL_METER, case.meter)
        try:
            response = await spec.call().achat_client_response()
        except (ProviderError, ContextOverflowError, BudgetExceededError) as exc:
            return self.invalid(f"the judge model failed: {type(exc).__name__}: {exc}")
        attempts = response.context.get(STRUCTURED_OUTPUT_ATTEMPTS)
        chat_response = response.chat_response
        result = chat_response.result if chat_response is not None else None
        text = result.output.text if result is not None else None
        if response.context.get(STRUCTURED_OUTPUT_VALID) is not True or text is None:
            error = response.context.get(STRUCTURED_OUTPUT_ERROR) or "no answer"
            return self.invalid(f"{error} (after {attempts} attempt(s); last answer {text!r})")
        return self.verdict(parse_json_output(text), attempts)

    def verdict(self, data: Any, attempts: Any) -> EvalScore:
        """The score of a validated verdict, checked once more (never trust a bound)."""
        score = data.get("score") if isinstance(data, dict) else None
        if (
            isinstance(score, bool)
            or not isinstance(score, (int, float))
            or not math.isfinite(score)
            or not self.scale_min <= score <= self.scale_max
        ):
            return self.invalid(f"score {json.dumps(score)} is not in the scale")
        reason = str(data.get("reason", "")).strip()
        span = self.scale_max - self.scale_min
        value = (score - self.scale_min) / span if self.normalize else float(score)
        passed = None if self.pass_threshold is None else score >= self.pass_threshold
        retried = (
            f", after {attempts} attempts" if isinstance(attempts, int) and attempts > 1 else ""
        )
        comment = (
            f"{_number(score)} on {_number(self.scale_min)}–{_number(self.scale_max)}"
            f"{retried}: {reason}"
        )
        return self.score(float(value), passed, comment)


def _llm_judge(spec: EvaluatorSpec) -> LlmJudgeEvaluator:
    p = spec.params
    low, high, integer = p["scale_min"], p["scale_max"], p["integer_scores"]
    if integer:
        for name in ("scale_min", "scale_max"):
            if not float(p[name]).is_integer():
                raise spec.error(name, "Enter a whole number, or set integer_scores to false.")
        low, high = int(low), int(high)
    if not low < high:
        raise spec.error("scale_max", f"Must be greater than scale_min ({_number(low)}).")
    threshold = p.get("pass_threshold")
    if threshold is not None and not low <= threshold <= high:
        raise spec.error(
            "pass_threshold", f"Must lie on the scale, {_number(low)} to {_number(high)}."
        )
    return LlmJudgeEvaluator(
        spec.key,
        p["rubric"],
        spec.chat_model,
        scale_min=low,
        scale_max=high,
        integer_scores=integer,
        pass_threshold=threshold,
        model=p.get("model"),
        max_repeat_attempts=p["max_repeat_attempts"],
        temperature=p["temperature"],
        max_tokens=p["max_tokens"],
        constrained=p["constrained"],
        normalize=p["normalize"],
    )


TYPES: tuple[EvaluatorType, ...] = (
    EvaluatorType(
        key="llm_judge",
        label="LLM judge",
        factory=_llm_judge,
        description="A chat model grades the answer against a rubric; its verdict is checked "
        "against a bounded JSON Schema with retries, and a judge that never gives a valid one "
        "scores 'invalid', never a number.",
        params_schema=object_schema(
            {
                "rubric": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 10_000,
                    "description": "What a good answer is, and what each score means.",
                },
                "scale_min": {"type": "number", "default": 1, "description": "Lowest score."},
                "scale_max": {"type": "number", "default": 5, "description": "Highest score."},
                "integer_scores": {
                    "type": "boolean",
                    "default": True,
                    "description": "Scores are whole numbers (a grammar can then bound them).",
                },
                "pass_threshold": {
                    "type": "number",
                    "description": "Pass when the score is at least this, on the rubric's "
                    "scale (default: no pass/fail).",
                },
                "model": {
                    "type": "string",
                    "pattern": "^[-a-zA-Z0-9_.]+$",
                    "maxLength": 100,
                    "description": "Chat-model configuration slug or settings alias (default: "
                    "the default chat model).",
                },
                "max_repeat_attempts": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 10,
                    "default": 3,
                    "description": "Retries after an invalid verdict.",
                },
                "temperature": {"type": "number", "minimum": 0, "maximum": 2, "default": 0},
                "max_tokens": {
                    "type": "integer",
                    "minimum": 16,
                    "maximum": 4096,
                    "default": 200,
                    "description": "Completion tokens per verdict.",
                },
                "constrained": {
                    "type": "boolean",
                    "default": True,
                    "description": "Send the verdict's schema as response_format (constrained "
                    "decoding); turn off for a server that refuses it.",
                },
                "normalize": {
                    "type": "boolean",
                    "default": True,
                    "description": "Store the score scaled to 0–1 rather than on the rubric's "
                    "scale.",
                },
            },
            required=("rubric",),
        ),
    ),
)
