"""Prompt templates with ``{name}`` placeholders (Spring AI ``PromptTemplate`` / ``PromptAssert``).

Rendering is a single pass: a value is inserted as-is and never scanned again, so retrieved
documents or user text containing ``{...}`` are never interpreted as template syntax. Only
``{identifier}`` is a placeholder; other braces (JSON examples) are literal text. ``{{`` and
``}}`` render as single braces. Divergence: placeholders are checked as real ``{name}`` fields,
not as substrings of the template (defect 5.6.38).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PromptTemplate", "assert_placeholders", "render"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")


def _placeholders(template: str) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for match in _TOKEN.finditer(template):
        if match.group(1):
            seen.setdefault(match.group(1))
    return tuple(seen)


def render(template: str, values: Mapping[str, Any]) -> str:
    """Render ``template`` with ``values``; raises ``ValueError`` naming missing placeholders."""
    missing = [name for name in _placeholders(template) if name not in values]
    if missing:
        raise ValueError(f"Missing values for template placeholders: {', '.join(missing)}")

    def substitute(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)[0]
        value = values[name]
        return "" if value is None else str(value)

    return _TOKEN.sub(substitute, template)


def assert_placeholders(template: str, names: Iterable[str]) -> None:
    """Raise ``ValueError`` unless ``template`` has every ``{name}`` in ``names``.

    Spring AI ``PromptAssert.templateHasRequiredPlaceholders``.

    The message is Spring AI's: ``"The following placeholders must be present in the prompt
    template: query, context"``.
    """
    if template is None:
        raise ValueError("promptTemplate cannot be null")
    wanted = list(names)
    if not wanted:
        raise ValueError("placeholders cannot be null or empty")
    present = set(_placeholders(template))
    missing = [name for name in wanted if name not in present]
    if missing:
        raise ValueError(
            "The following placeholders must be present in the prompt template: "
            + ", ".join(missing)
        )


class PromptTemplate:
    """A template string plus the placeholders it declares.

    ``PromptTemplate(text, required=("query",))`` raises ``ValueError`` at construction when a
    required placeholder is missing; :meth:`render` raises when a value is missing.
    """

    __slots__ = ("placeholders", "template")

    def __init__(self, template: str, *, required: Iterable[str] = ()) -> None:
        if not isinstance(template, str):
            raise ValueError("template must be a string")
        required = tuple(required)
        if required:
            assert_placeholders(template, required)
        self.template = template
        self.placeholders = _placeholders(template)

    def render(self, values: Mapping[str, Any] | None = None, /, **kwargs: Any) -> str:
        merged = {**(values or {}), **kwargs}
        return render(self.template, merged)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PromptTemplate) and other.template == self.template

    def __hash__(self) -> int:
        return hash(self.template)

    def __repr__(self) -> str:
        return f"PromptTemplate({self.template!r})"
