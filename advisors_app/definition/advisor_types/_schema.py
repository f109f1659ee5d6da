"""Helpers shared by the built-in type modules."""

from __future__ import annotations

from collections.abc import Callable

from advisors_app.definition.registry import AdvisorType
from advisors_app.validation import object_schema

__all__ = ["BuiltinTypes", "object_schema"]

#: ``(key, make)`` pairs: the type's key and a function that makes the type.
BuiltinTypes = tuple[tuple[str, Callable[[], AdvisorType]], ...]
