"""The evaluator registry: keys, params validated with errors by field, third-party evaluators."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest

from advisors_app.core.registry import Registry
from advisors_app.evaluation.evaluators import (
    BUILTIN_EVALUATORS,
    BaseEvaluator,
    EvalCase,
    EvalScore,
    EvaluatorParamsError,
    EvaluatorRegistry,
    EvaluatorSpec,
    EvaluatorType,
    evaluator_registry,
    register_builtins,
)

from .helpers import case

BUILTINS = (
    "exact",
    "contains",
    "regex",
    "token_f1",
    "json_schema",
    "retrieval_hit_at_k",
    "mrr",
    "tool_call_match",
    "latency_under",
    "cost_under",
    "llm_judge",
)


def test_every_builtin_is_registered_in_order_with_a_description() -> None:
    assert evaluator_registry.keys[: len(BUILTINS)] == BUILTINS
    for evaluator_type in evaluator_registry:
        assert evaluator_type.description and evaluator_type.label
        assert evaluator_type.params_schema["properties"]["key"]["type"] == "string"
    assert ("mrr", "Reciprocal rank (MRR) (mrr)") in evaluator_registry.choices()
    assert "llm_judge" in evaluator_registry and "nope" not in evaluator_registry
    register_builtins()  # idempotent
    assert len([k for k in evaluator_registry.keys if k == "exact"]) == 1


@pytest.mark.parametrize(
    ("key", "params", "errors"),
    [
        (
            "exact",
            {"whitespace": "all", "colour": "red"},
            {
                "params.colour": [
                    "Unknown field. Known fields: expected, ignore_case, key, whitespace."
                ],
                "params.whitespace": ["'all' is not one of ['exact', 'strip', 'collapse']"],
            },
        ),
        (
            "exact",
            {"key": "has space"},
            {"params.key": ["'has space' does not match '^[A-Za-z0-9_-]{1,64}$'"]},
        ),
        ("regex", {}, {"params.pattern": ["This field is required."]}),
        (
            "regex",
            {"pattern": "(unclosed"},
            {
                "params.pattern": [
                    "Not a valid regular expression: missing ), unterminated "
                    "subpattern at position 0."
                ]
            },
        ),
        ("contains", {"strings": []}, {"params.strings": ["[] should be non-empty"]}),
        ("retrieval_hit_at_k", {"k": 0}, {"params.k": ["0 is less than the minimum of 1"]}),
        ("mrr", {"threshold": 2}, {"params.threshold": ["2 is greater than the maximum of 1"]}),
        (
            "latency_under",
            {"threshold_ms": 0},
            {"params.threshold_ms": ["0 is less than or equal to the minimum of 0"]},
        ),
        (
            "cost_under",
            {"threshold": "1e3"},
            {"params.threshold": ["'1e3' does not match '^[0-9]+(\\\\.[0-9]+)?$'"]},
        ),
        (
            "cost_under",
            {"threshold": "0.01", "currency": "usd"},
            {"params.currency": ["'usd' does not match '^[A-Z]{3}$'"]},
        ),
        (
            "json_schema",
            {"schema": {"type": "nonsense"}},
            {
                "params.schema": [
                    "Not a valid JSON Schema: 'nonsense' is not valid under any of "
                    "the given schemas"
                ]
            },
        ),
        ("llm_judge", {}, {"params.rubric": ["This field is required."]}),
        (
            "llm_judge",
            {"rubric": "r", "scale_min": 5, "scale_max": 5},
            {"params.scale_max": ["Must be greater than scale_min (5)."]},
        ),
        (
            "llm_judge",
            {"rubric": "r", "scale_max": 4.5},
            {"params.scale_max": ["Enter a whole number, or set integer_scores to false."]},
        ),
        (
            "llm_judge",
            {"rubric": "r", "pass_threshold": 7},
            {"params.pass_threshold": ["Must lie on the scale, 1 to 5."]},
        ),
        (
            "llm_judge",
            {"rubric": "r", "model": "../etc"},
            {"params.model": ["'../etc' does not match '^[-a-zA-Z0-9_.]+$'"]},
        ),
        (
            "nope",
            {},
            {
                "evaluator": [
                    "Unknown evaluator 'nope'. Registered evaluators: "
                    + ", ".join(evaluator_registry.keys)
                    + "."
                ]
            },
        ),
    ],
)
def test_params_are_validated_with_errors_by_field(
    key: str, params: dict[str, Any], errors: dict[str, list[str]]
) -> None:
    with pytest.raises(EvaluatorParamsError) as raised:
        evaluator_registry.build(key, params)
    assert raised.value.errors == errors
    assert isinstance(raised.value, ValueError)
    assert evaluator_registry.params_errors(key, params) == errors


def test_the_error_message_names_the_evaluator_and_each_field() -> None:
    with pytest.raises(ValueError, match=r"invalid params for evaluator 'regex': params\.pattern"):
        evaluator_registry.build("regex", {"pattern": "["})
    assert evaluator_registry.params_errors("regex", ["not", "an", "object"]) == {
        "params": ["Enter a JSON object."]
    }
    assert evaluator_registry.params_errors("regex", {"pattern": "ok"}) == {}


def test_params_that_cannot_be_stored_are_refused() -> None:
    errors = evaluator_registry.params_errors("contains", {"strings": ["a\x00b"]})
    assert errors == {"params.strings.0": ["Null characters are not allowed."]}


# --- third parties -------------------------------------------------------------------------


class Shorter(BaseEvaluator):
    """Passes when the answer has at most ``limit`` characters (a third party's evaluator)."""

    __slots__ = ("limit",)

    def __init__(self, key: str, limit: int) -> None:
        super().__init__(key)
        self.limit = limit

    async def evaluate(self, case: EvalCase) -> EvalScore:
        return self.check(len(case.output) <= self.limit, f"{len(case.output)} characters")


SHORTER_SCHEMA = {
    "type": "object",
    "properties": {"limit": {"type": "integer", "minimum": 1, "default": 10}},
    "additionalProperties": False,
}


@pytest.fixture
def shorter() -> Iterator[None]:
    evaluator_registry.register(
        "shorter_than",
        params_schema=SHORTER_SCHEMA,
        factory=lambda spec: Shorter(spec.key, spec.params["limit"]),
        description="Passes when the answer has at most `limit` characters.",
    )
    yield
    evaluator_registry.unregister("shorter_than")


@pytest.mark.usefixtures("shorter")
async def test_a_third_party_evaluator_is_registered_validated_and_built() -> None:
    assert evaluator_registry.keys[-1] == "shorter_than"
    assert evaluator_registry["shorter_than"].label == "Shorter than"
    evaluator = evaluator_registry.build("shorter_than", {"key": "brevity"})
    assert await evaluator.evaluate(case("Paris.")) == EvalScore(
        "brevity", True, True, "6 characters"
    )
    assert (
        await evaluator_registry.build("shorter_than", {"limit": 3}).evaluate(case("Paris."))
    ).passed is False
    assert evaluator_registry.params_errors("shorter_than", {"limit": "3"}) == {
        "params.limit": ["'3' is not of type 'integer'"]
    }
    with pytest.raises(ValueError, match="already registered; pass replace=True"):
        evaluator_registry.register(
            "shorter_than", params_schema=SHORTER_SCHEMA, factory=lambda spec: Shorter(spec.key, 1)
        )


def test_registration_refuses_bad_keys_schemas_and_the_reserved_key_param() -> None:
    registry = EvaluatorRegistry()

    def factory(spec: EvaluatorSpec) -> Shorter:
        return Shorter(spec.key, 1)

    with pytest.raises(ValueError, match="never an import path"):
        registry.register(
            "my_app.evaluators.Shorter", params_schema=SHORTER_SCHEMA, factory=factory
        )
    with pytest.raises(ValueError, match="must describe an object"):
        registry.register("short", params_schema={"type": "string"}, factory=factory)
    with pytest.raises(ValueError, match="may not define 'key'"):
        registry.register(
            "short",
            params_schema={"type": "object", "properties": {"key": {"type": "string"}}},
            factory=factory,
        )
    with pytest.raises(Exception, match="is not valid under any of the given schemas"):
        registry.register(
            "short",
            params_schema={"type": "object", "properties": {"a": {"type": 3}}},
            factory=factory,
        )
    assert len(registry) == 0


def test_a_factory_must_return_an_async_evaluator_under_the_spec_key() -> None:
    registry = EvaluatorRegistry()

    class Sync:
        key = "plain"

        def evaluate(self, case: EvalCase) -> EvalScore:  # not async
            return EvalScore(self.key, True, True)

    registry.register("plain", params_schema=SHORTER_SCHEMA, factory=lambda spec: Sync())
    with pytest.raises(TypeError, match="no key and async evaluate"):
        registry.build("plain", {})
    registry.register(
        "fixed", params_schema=SHORTER_SCHEMA, factory=lambda spec: Shorter("fixed", 1)
    )
    assert registry.build("fixed").key == "fixed"
    with pytest.raises(TypeError, match=r"give it spec\.key \('renamed'\)"):
        registry.build("fixed", {"key": "renamed"})


def test_a_value_error_from_a_factory_is_reported_on_params() -> None:
    registry = EvaluatorRegistry()

    def factory(spec: EvaluatorSpec) -> Shorter:
        raise ValueError("limit and text disagree")

    registry.register("picky", params_schema=SHORTER_SCHEMA, factory=factory)
    assert registry.params_errors("picky", {}) == {"params": ["limit and text disagree"]}


def test_a_ready_evaluator_type_registers_like_an_advisor_type() -> None:
    registry = EvaluatorRegistry()
    ready = EvaluatorType("brief", SHORTER_SCHEMA, lambda spec: Shorter(spec.key, 5))
    assert registry.register(ready) is ready and registry["brief"] is ready
    assert isinstance(registry, Registry)
    with pytest.raises(TypeError, match=r"register\('brief2', \.\.\.\) needs params_schema="):
        registry.register("brief2", factory=lambda spec: Shorter(spec.key, 5))
    with pytest.raises(KeyError, match=r"'nope'\. Registered evaluators: brief\."):
        registry["nope"]


def test_an_evaluator_registered_for_a_block_is_gone_after_it() -> None:
    temporary = EvaluatorType("shorter_than", SHORTER_SCHEMA, lambda spec: Shorter(spec.key, 5))
    with evaluator_registry.registered(temporary):
        assert evaluator_registry.params_errors("shorter_than", {}) == {}
    assert "shorter_than" not in evaluator_registry


def test_a_private_registry_takes_the_builtins() -> None:
    registry = EvaluatorRegistry()
    register_builtins(registry)
    assert registry.keys == tuple(t.key for t in BUILTIN_EVALUATORS) == BUILTINS


@pytest.mark.parametrize(
    "module_name",
    [
        "advisors_app.evaluation.evaluators",
        "advisors_app.evaluation.evaluators.base",
        "advisors_app.evaluation.evaluators.registry",
        "advisors_app.evaluation.evaluators.services",
        "advisors_app.evaluation.evaluators.text",
        "advisors_app.evaluation.evaluators.json_schema",
        "advisors_app.evaluation.evaluators.retrieval",
        "advisors_app.evaluation.evaluators.tools",
        "advisors_app.evaluation.evaluators.thresholds",
        "advisors_app.evaluation.evaluators.llm_judge",
    ],
)
def test_all_names_resolve(module_name: str) -> None:
    module = importlib.import_module(module_name)
    assert len(set(module.__all__)) == len(module.__all__)
    assert all(hasattr(module, name) for name in module.__all__)
