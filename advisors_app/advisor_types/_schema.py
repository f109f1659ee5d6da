"""Helpers shared by the built-in type modules."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from advisors_app.registry import AdvisorType

__all__ = ["BuiltinTypes", "advisor", "object_schema"]

#: ``(key, make)`` pairs: the type's key and a function that makes the type.
BuiltinTypes = tuple[tuple[str, Callable[[], AdvisorType]], ...]


def advisor(module: str, name: str) -> Any:
    """The class ``name`` of ``advisors_app.core.advisors.<module>``, imported when first built."""
    return getattr(importlib.import_module(f"advisors_app.core.advisors.{module}"), name)


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
