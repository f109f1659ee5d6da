"""Structured output: JSON Schemas from Python types, format instructions, and parsing.

Follows Spring AI's ``BeanOutputConverter``: the schema is derived from the target type, the
format instructions ask for bare RFC 8259 JSON, and Markdown code fences are stripped before
parsing. Supported targets: a JSON Schema ``dict`` (or its JSON text), dataclasses,
``TypedDict``, Pydantic models (anything with ``model_json_schema``), ``Enum``, ``Literal``,
``list[T]``, ``dict[str, T]``, ``Optional[T]`` and the JSON scalar types.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any

__all__ = ["format_instructions", "json_schema_for", "parse_json_output", "to_entity"]

_SCALARS: dict[Any, dict[str, Any]] = {
    str: {"type": "string"},
    int: {"type": "integer"},
    float: {"type": "number"},
    bool: {"type": "boolean"},
    type(None): {"type": "null"},
    Any: {},
}

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def json_schema_for(target: Any) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) for ``target``; raises ``ValueError`` for unsupported types.

    A ``dict`` is taken as a schema already; a ``str`` is parsed as JSON schema text
    (``ValueError("Failed to parse JSON schema")`` when it is not JSON, as Spring AI says).
    """
    if isinstance(target, Mapping):
        return dict(target)
    if isinstance(target, str):
        try:
            parsed = json.loads(target)
        except json.JSONDecodeError as exc:
            raise ValueError("Failed to parse JSON schema") from exc
        if not isinstance(parsed, dict):
            raise ValueError("Failed to parse JSON schema")
        return parsed
    schema = _schema(target)
    schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    return schema


def _schema(target: Any) -> dict[str, Any]:
    if target in _SCALARS:
        return dict(_SCALARS[target])
    if hasattr(target, "model_json_schema"):
        return dict(target.model_json_schema())
    origin = typing.get_origin(target)
    args = typing.get_args(target)
    if origin in (list, tuple, set, frozenset) or target in (list, tuple):
        return {"type": "array", "items": _schema(args[0]) if args else {}}
    if origin is dict or target is dict:
        return {
            "type": "object",
            "additionalProperties": _schema(args[1]) if len(args) == 2 else {},
        }
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_schema(a) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if isinstance(target, type) and issubclass(target, enum.Enum):
        return {"enum": [member.value for member in target]}
    if dataclasses.is_dataclass(target) and isinstance(target, type):
        hints = typing.get_type_hints(target)
        fields = dataclasses.fields(target)
        return {
            "type": "object",
            "properties": {f.name: _schema(hints[f.name]) for f in fields},
            "required": [
                f.name
                for f in fields
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            ],
        }
    if typing.is_typeddict(target):
        hints = typing.get_type_hints(target)
        return {
            "type": "object",
            "properties": {name: _schema(hint) for name, hint in hints.items()},
            "required": sorted(target.__required_keys__),
        }
    raise ValueError(f"cannot derive a JSON Schema from {target!r}")


def format_instructions(schema: Mapping[str, Any]) -> str:
    """The instructions appended to the user message asking for JSON matching ``schema``."""
    return (
        "Your response should be in JSON format.\n"
        "Do not include any explanations, only provide a RFC8259 compliant JSON response "
        "following this format without deviation.\n"
        "Do not include markdown code block in your response.\n"
        "Remove the ```json markdown from the output.\n"
        "Here is the JSON Schema instance your output must adhere to:\n"
        f"```{json.dumps(schema, indent=2)}```\n"
    )


def parse_json_output(text: str) -> Any:
    """Parse model output as JSON, after stripping a surrounding Markdown code fence.

    Raises ``json.JSONDecodeError`` (a ``ValueError``) when the text is not JSON — including
    ``NaN`` and ``Infinity``, which Python's parser accepts but RFC 8259 does not (and which
    pass every ``minimum``/``maximum`` of a schema).
    """
    match = _FENCE.match(text)
    body = match.group(1) if match else text
    return json.loads(body, parse_constant=lambda name: _not_json(name, body))


def _not_json(name: str, text: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not JSON (RFC 8259)", text, text.find(name))


def to_entity(data: Any, target: Any) -> Any:
    """Convert decoded JSON ``data`` into ``target`` (a schema dict or str leaves it as is)."""
    if isinstance(target, (Mapping, str)) or target is Any:
        return data
    if hasattr(target, "model_validate"):
        return target.model_validate(data)
    origin = typing.get_origin(target)
    args = typing.get_args(target)
    if origin in (list, tuple, set, frozenset) and args:
        items = [to_entity(item, args[0]) for item in data]
        return origin(items) if origin is not list else items
    if origin is dict and len(args) == 2:
        return {key: to_entity(value, args[1]) for key, value in data.items()}
    if isinstance(target, type) and issubclass(target, enum.Enum):
        return target(data)
    if dataclasses.is_dataclass(target) and isinstance(target, type):
        hints = typing.get_type_hints(target)
        names = {f.name for f in dataclasses.fields(target)}
        return target(**{k: to_entity(v, hints[k]) for k, v in data.items() if k in names})
    return data
