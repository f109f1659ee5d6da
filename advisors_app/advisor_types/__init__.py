"""The built-in advisor types of the registry, keyed by their core module's name.

Each entry maps admin-editable params (a JSON Schema) onto the keyword arguments of a core
advisor in ``advisors_app.core.advisors``; factories import the advisor when they first build
it. Default orders are Spring AI's except where a seed defect says otherwise (each noted on its
entry). Registered by ``AdvisorsAppConfig.ready()``.
"""

from __future__ import annotations

import importlib.util

from advisors_app.registry import advisor_types

from . import guards, memory, recipes, tools
from ._schema import BuiltinTypes

__all__ = ["BUILTIN_TYPES", "register_builtins"]

#: Every built-in type, as ``(key, make)``.
BUILTIN_TYPES: BuiltinTypes = (*recipes.TYPES, *guards.TYPES, *memory.TYPES, *tools.TYPES)


def _installed(module: str) -> bool:
    return importlib.util.find_spec(f"advisors_app.core.advisors.{module}") is not None


def register_builtins() -> None:
    """Register every built-in type whose advisor module is installed (idempotent)."""
    for key, make in BUILTIN_TYPES:
        if key not in advisor_types and _installed(key):
            advisor_types.register(make())
