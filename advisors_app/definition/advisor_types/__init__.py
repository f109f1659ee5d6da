"""The built-in advisor types of the registry, keyed by their core module's name.

Each entry maps admin-editable params (a JSON Schema) onto the keyword arguments of a core
advisor in ``advisors_app.core.advisors`` and names that class (``advisor_class``): the type's
default order, roles and stream safety are the class's (``DEFAULT_ORDER``, ``ROLES``,
``STREAM_SAFE``, ``AFTER_SIDE_EFFECTS``), never restated here, except a divergence noted on its
entry (SafeGuard's order). Importing the classes is cheap: their heavy dependencies (phone
metadata, BM25) load when an advisor is first built. Registered by
``AdvisorsAppConfig.ready()``.
"""

from __future__ import annotations

from advisors_app.definition.registry import advisor_types

from . import guards, memory, recipes, retrieval, tools
from ._schema import BuiltinTypes

__all__ = ["BUILTIN_TYPES", "register_builtins"]

#: Every built-in type, as ``(key, make)``.
BUILTIN_TYPES: BuiltinTypes = (
    *recipes.TYPES,
    *guards.TYPES,
    *memory.TYPES,
    *retrieval.TYPES,
    *tools.TYPES,
)


def register_builtins() -> None:
    """Register every built-in type (idempotent: a key already registered is left alone)."""
    for key, make in BUILTIN_TYPES:
        if key not in advisor_types:
            advisor_types.register(make())
