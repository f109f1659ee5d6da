"""Prompt templates with ``{name}`` placeholders (Spring AI ``PromptTemplate`` / ``PromptAssert``).

Rendering is a single pass: a value is inserted as-is and never scanned again, so retrieved
documents or user text containing ``{...}`` are never interpreted as template syntax. Only
``{identifier}`` is a placeholder; other braces (JSON examples) are literal text. ``{{`` and
``}}`` render as single braces. Divergence: placeholders are checked as real ``{name}`` fields,
not as substrings of the template (defect 5.6.38).

Rendering is lenient (a lone ``{`` renders as itself), but a lone brace is almost always a
typo for a placeholder, so templates people write are checked with
:func:`assert_balanced_braces` before they are stored (the admin, the chain lint).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["PromptTemplate", "assert_balanced_braces", "assert_placeholders", "render"]

_TOKEN = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
# _TOKEN's tokens first, so that braces are paired exactly as rendering reads them.
_BRACE = re.compile(_TOKEN.pattern + r"|[{}]")


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


def assert_balanced_braces(template: str) -> None:
    """Raise ``ValueError`` naming the line and column of the first brace left unpaired.

    Braces pair as in JSON (``{"a": {"b": 1}, "c": 2}`` is fine) once placeholders, ``{{``
    and ``}}`` are set aside, as rendering reads them: ``{"a": {"b": 1}}`` is refused, its
    ``}}`` being one literal brace. An addition to Spring AI.
    """
    opened: list[int] = []
    for match in _BRACE.finditer(template):
        token = match.group(0)
        if token == "{":
            opened.append(match.start())
        elif token == "}" and opened:
            opened.pop()
        elif token == "}":
            raise ValueError(_unbalanced(template, match.start(), 'write "}}" for a literal brace'))
    if opened:
        fix = 'close it with "}" or write "{{" for a literal brace'
        if "}}" in template[opened[0] :]:
            fix += ' ("}}" is one literal brace, not two closing ones)'
        raise ValueError(_unbalanced(template, opened[0], fix))


def _unbalanced(template: str, position: int, fix: str) -> str:
    line = template.count("\n", 0, position) + 1
    column = position - template.rfind("\n", 0, position)
    excerpt = template[position : position + 20].split("\n", 1)[0]
    return (
        f'Unbalanced "{template[position]}" at line {line}, column {column} ({excerpt!r}): {fix}.'
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
