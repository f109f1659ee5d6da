"""JSON Schema validation whose errors name the field: ``{"params.top_k": ["... "]}``.

Used by the admin forms, the API and the runtime alike, so a bad value gets the same message
wherever it comes from. Schemas are JSON Schema 2020-12, checked with ``jsonschema``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError as SchemaValidationError

from advisors_app.core.prompt import ChatOptions
from advisors_app.core.vectorstore import FilterExpressionTextParser
from advisors_app.orders import order_range_problem, parse_order

__all__ = [
    "ADVISOR_ORDER_FORMAT",
    "CHAT_OPTIONS_SCHEMA",
    "FILTER_EXPRESSION_FORMAT",
    "REQUEST_OPTIONS",
    "FieldErrors",
    "chat_options_errors",
    "check_schema",
    "json_value_errors",
    "object_schema",
    "printable",
    "schema_errors",
    "text_problem",
    "validate_json_value",
]

FieldErrors = dict[str, list[str]]
"""Error messages by field path (``"params.top_k"``); ``""`` is the whole value."""


def object_schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A closed JSON Schema object with ``properties`` (``required`` listed when given): the
    params schema of an advisor type or an evaluator."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


#: The JSON form of core ``ChatOptions`` (``to_dict``/``from_dict``), with sane ranges.
CHAT_OPTIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "model": {
            "type": "string",
            "minLength": 1,
            "description": "Model name sent to the provider.",
        },
        "temperature": {"type": "number", "minimum": 0, "maximum": 2},
        # Upper bounds: beyond them no model answers, and providers fail on overflowed ints.
        "max_tokens": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1_000_000,
            "description": "Completion tokens.",
        },
        "top_p": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
        "top_k": {"type": "integer", "minimum": 1, "maximum": 1_000_000},
        "stop": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 16},
        "frequency_penalty": {"type": "number", "minimum": -2, "maximum": 2},
        "presence_penalty": {"type": "number", "minimum": -2, "maximum": 2},
        "seed": {"type": "integer", "minimum": -(2**63), "maximum": 2**63 - 1},
        "response_format": {"type": "object"},
        "extra": {"type": "object", "description": "Provider-specific options, sent as they are."},
    },
}

#: Options a caller may set per request (``params["options"]``); the rest are the chain's.
REQUEST_OPTIONS = (
    "temperature",
    "max_tokens",
    "top_p",
    "top_k",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "seed",
)


#: ``{"type": "string", "format": "filter-expression"}``: text in Spring AI's filter language,
#: parsed when validated, so a bad filter is refused with its position before a turn runs.
FILTER_EXPRESSION_FORMAT = "filter-expression"

# Only the formats defined here are checked (jsonschema checks none unless asked).
_formats = FormatChecker(formats=())


@_formats.checks(FILTER_EXPRESSION_FORMAT, raises=ValueError)
def _is_filter_expression(value: object) -> bool:
    if isinstance(value, str) and value.strip():
        FilterExpressionTextParser().parse(value)
    return True


#: ``{"type": ["integer", "string"], "format": "advisor-order"}``: an advisor order as the
#: chain's order column takes it (``"HIGHEST+250"``, ``"LOWEST-10"``, an integer), in range.
ADVISOR_ORDER_FORMAT = "advisor-order"


@_formats.checks(ADVISOR_ORDER_FORMAT, raises=ValueError)
def _is_advisor_order(value: object) -> bool:
    if isinstance(value, str):
        problem = order_range_problem(parse_order(value))
        if problem:
            raise ValueError(problem)
    return True


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json), format_checker=_formats)


def check_schema(schema: Mapping[str, Any]) -> None:
    """Raise ``jsonschema.SchemaError`` unless ``schema`` is a valid JSON Schema 2020-12."""
    Draft202012Validator.check_schema(schema)


def _field(prefix: str, error: SchemaValidationError) -> str:
    path = [str(p) for p in error.absolute_path]
    # "required" and "additionalProperties" report the object; the field is the property.
    if error.validator == "required":
        missing = [n for n in error.validator_value if n not in (error.instance or {})]
        path.append(missing[0] if missing else "")
    elif error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = error.schema.get("properties", {})
        extra = sorted(k for k in error.instance if k not in allowed)
        path.append(extra[0] if extra else "")
    return ".".join(p for p in [prefix, *path] if p)


def _message(error: SchemaValidationError) -> str:
    # A schema may word its own refusal (``{"not": {}, "x-error": "..."}``).
    if isinstance(error.schema, Mapping) and isinstance(error.schema.get("x-error"), str):
        return error.schema["x-error"]
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        allowed = sorted(error.schema.get("properties", {}))
        known = ", ".join(allowed) if allowed else "none"
        return f"Unknown field. Known fields: {known}."
    if error.validator == "required":
        return "This field is required."
    if error.validator == "format" and error.cause is not None:
        return str(error.cause)
    return str(error.message)


def schema_errors(schema: Mapping[str, Any], instance: Any, prefix: str = "") -> FieldErrors:
    """Every violation of ``schema`` by ``instance``, keyed by dotted field path under ``prefix``,
    and everything in it that cannot be stored (:func:`json_value_errors`): checked values end
    up in PostgreSQL.

    ``schema_errors(schema, {"top_k": "4"}, "params")`` →
    ``{"params.top_k": ["'4' is not of type 'integer'"]}``. Empty when ``instance`` is valid.
    """
    validator = _validator(json.dumps(schema, sort_keys=True))
    errors = json_value_errors(instance, prefix)
    for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.path))):
        errors.setdefault(printable(_field(prefix, error)), []).append(printable(_message(error)))
    return errors


_NUL = "Null characters are not allowed."  # Django's and DRF's wording
_SURROGATE = "Unpaired surrogate characters are not allowed."
_NOT_FINITE = "Enter a finite number."
# json decodes a valid pair ("\\ud83d\\ude00") to one character: what is left is unpaired.
_SURROGATES = re.compile("[\ud800-\udfff]")


def printable(text: str) -> str:
    """``text`` with each unpaired surrogate written as its escape (``\\ud800``): a message or
    field path that quotes refused input must itself be encodable (as UTF-8 in a response)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored (PostgreSQL refuses NUL; UTF-8 cannot encode a lone
    surrogate), or ``None``."""
    if "\x00" in text:
        return _NUL
    if _SURROGATES.search(text):
        return _SURROGATE
    return None


def json_value_errors(value: Any, prefix: str = "") -> FieldErrors:
    """Where a JSON ``value`` holds what cannot be stored or used, by dotted field path: a NUL or
    an unpaired surrogate in a string or key (:func:`text_problem`), or NaN/infinity (which
    Python's json accepts and PostgreSQL's jsonb refuses). Walked without recursion, so any
    depth the parser accepted is checked.
    """
    errors: FieldErrors = {}

    def refuse(path: str, message: str) -> None:
        if message not in errors.setdefault(path, []):
            errors[path].append(message)

    pending: list[tuple[Any, str]] = [(value, prefix)]
    while pending:
        item, path = pending.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem:
                refuse(path, problem)
        elif isinstance(item, float):
            if not math.isfinite(item):
                refuse(path, _NOT_FINITE)
        elif isinstance(item, Mapping):
            for key, child in item.items():
                child_path = ".".join(p for p in (path, printable(str(key))) if p)
                problem = text_problem(str(key))
                if problem:
                    refuse(child_path, problem)
                pending.append((child, child_path))
        elif isinstance(item, (list, tuple)):
            for index, child in enumerate(item):
                pending.append((child, ".".join(p for p in (path, str(index)) if p)))
    return dict(sorted(errors.items()))


def validate_json_value(value: Any) -> None:
    """A Django/DRF field validator: raise ``ValidationError`` naming where a JSON ``value``
    holds what cannot be stored (:func:`json_value_errors`)."""
    errors = json_value_errors(value)
    if errors:
        messages = [f"{path}: {m}" if path else m for path, ms in errors.items() for m in ms]
        raise ValidationError(messages)


def chat_options_errors(
    data: Any, prefix: str = "options", allowed: tuple[str, ...] | None = None
) -> FieldErrors:
    """Errors of ``data`` as core ``ChatOptions`` (optionally only the ``allowed`` names)."""
    schema = CHAT_OPTIONS_SCHEMA
    if allowed is not None:
        schema = {
            **schema,
            "properties": {k: v for k, v in schema["properties"].items() if k in allowed},
        }
    errors = schema_errors(schema, data, prefix)
    if not errors:
        try:
            ChatOptions.from_dict(data)
        except (TypeError, ValueError) as exc:
            errors[prefix] = [str(exc)]
    return errors
