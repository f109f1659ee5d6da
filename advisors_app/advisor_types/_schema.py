"""Helpers shared by the built-in type modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from advisors_app.registry import AdvisorType

__all__ = ["BuiltinTypes", "object_schema"]

#: ``(key, make)`` pairs: the type's key and a function that makes the type.
BuiltinTypes = tuple[tuple[str, Callable[[], AdvisorType]], ...]


def object_schema(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """A closed JSON Schema object with ``properties``."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema
