"""``json_schema``: the answer is JSON and valid against a JSON Schema (or equals a value).

The answer is parsed as ``ChatClient.entity()`` and the structured-output advisor parse it (a
Markdown code fence around the JSON is accepted); NaN and infinities, which Python's parser
lets through, are refused as they are no JSON. The schema is ``params.schema``, else the
item's ``expected.json``; with ``expected_json_as="value"`` the item's ``expected.json`` is
instead the value the answer must equal (``true`` never equals ``1``). Validation is the
project's (:func:`advisors_app.validation.schema_errors`, JSON Schema 2020-12), so a failure
names the field: ``"total: 'x' is not of type 'number'"``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema.exceptions import SchemaError

from advisors_app.core.structured import parse_json_output
from advisors_app.validation import check_schema, json_value_errors, schema_errors

from .base import BaseEvaluator, EvalCase, EvalScore, json_equal
from .registry import EvaluatorSpec, EvaluatorType, object_schema

__all__ = ["TYPES", "JsonSchemaEvaluator"]


class JsonSchemaEvaluator(BaseEvaluator):
    """Passes when the answer parses as JSON and validates (or equals, see the module)."""

    __slots__ = ("expected_json_as", "schema")

    def __init__(
        self, key: str, schema: Mapping[str, Any] | None = None, *, expected_json_as: str = "schema"
    ) -> None:
        super().__init__(key)
        self.schema = schema
        self.expected_json_as = expected_json_as

    async def evaluate(self, case: EvalCase) -> EvalScore:
        schema = self.schema
        expected_value: Any = None
        if schema is None:
            if "json" not in case.expected:
                return self.not_applicable("no params.schema and no expected.json")
            if self.expected_json_as == "value":
                expected_value = case.expected["json"]
            else:
                schema = case.expected["json"]
                problem = _schema_problem(schema)
                if problem:
                    return self.not_applicable(f"expected.json is no JSON Schema: {problem}")
        try:
            data = parse_json_output(case.output)
        except json.JSONDecodeError as exc:
            return self.check(False, f"the answer is not JSON: {exc}")
        not_json = json_value_errors(data)
        if not_json:
            return self.check(False, "the answer is not JSON: " + _describe(not_json))
        if schema is None:
            if json_equal(data, expected_value):
                return self.check(True, "the answer equals expected.json")
            return self.check(False, "the answer's JSON differs from expected.json")
        errors = schema_errors(schema, data)
        if errors:
            return self.check(False, _describe(errors))
        return self.check(True, "valid JSON for the schema")


def _schema_problem(schema: Any) -> str | None:
    if not isinstance(schema, (Mapping, bool)):
        return "a schema is a JSON object (or true/false)"
    try:
        check_schema(schema)  # type: ignore[arg-type]
    except SchemaError as exc:
        return str(exc.message)
    return None


def _describe(errors: Mapping[str, list[str]]) -> str:
    return "; ".join(
        f"{field or '(root)'}: {' '.join(messages)}" for field, messages in errors.items()
    )


def _json_schema(spec: EvaluatorSpec) -> JsonSchemaEvaluator:
    schema = spec.params.get("schema")
    if schema is not None:
        problem = _schema_problem(schema)
        if problem:
            raise spec.error("schema", f"Not a valid JSON Schema: {problem}")
    return JsonSchemaEvaluator(spec.key, schema, expected_json_as=spec.params["expected_json_as"])


TYPES: tuple[EvaluatorType, ...] = (
    EvaluatorType(
        key="json_schema",
        label="JSON Schema",
        factory=_json_schema,
        description="Passes when the answer is JSON valid against `schema`, else against the "
        "item's expected.json (or equal to it, with expected_json_as='value').",
        params_schema=object_schema(
            {
                "schema": {
                    "type": ["object", "boolean"],
                    "description": "JSON Schema (2020-12) the answer must satisfy "
                    "(default: the item's expected.json).",
                },
                "expected_json_as": {
                    "enum": ["schema", "value"],
                    "default": "schema",
                    "description": "How to read the item's expected.json without a schema "
                    "param: as a JSON Schema, or as the value the answer must equal.",
                },
            }
        ),
    ),
)
