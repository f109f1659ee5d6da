"""Chain lint: structural mistakes in a chain's advisors, found before a request runs.

Runs when a chain is saved in the admin (errors block the save, warnings are shown) and in
``manage.py check --database default`` (every stored chain). Each rule has a stable id:

- ``advisors_app.E101``: more than one tool advisor (seed §4.4, Spring's
  "At most one ToolAdvisor is allowed").
- ``advisors_app.E102``: a memory advisor runs inside the tool loop (it would store every tool
  round; bug case B09).
- ``advisors_app.W103``: a guard runs inside a memory advisor (blocked input would be stored
  and replayed on every later turn; bug case B14).
- ``advisors_app.W104``: a retrieval (RAG) advisor runs outside the memory advisor: memory
  then stores the augmented prompt, retrieved excerpts included, as the user's message and
  replays it every turn; and the search cannot see the conversation history (bug case B22).
- ``advisors_app.E105``: an advisor whose ``after`` has side effects is not stream-safe.
- ``advisors_app.E106``: a template has a brace left unpaired, or lacks a placeholder its
  advisor requires.
- ``advisors_app.E107``: an order outside ``HIGHEST_PRECEDENCE..LOWEST_PRECEDENCE``.
- ``advisors_app.E108``: an unregistered advisor type.
- ``advisors_app.E109``: params that do not match the type's JSON Schema.
- ``advisors_app.E110``: a reference to a row that does not exist (word list, template, ...).
- ``advisors_app.W112``: a guard that takes word lists has no word at all (its lists are empty
  and it has no inline ``words``): it blocks nothing.

"Inside" means later in the chain's execution order (larger order; equal orders keep the
rows' saved order).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.apps import apps

from advisors_app.core.advisor import HIGHEST_PRECEDENCE, LOWEST_PRECEDENCE
from advisors_app.core.templates import assert_balanced_braces, assert_placeholders
from advisors_app.registry import (
    AdvisorType,
    advisor_types,
    params_errors,
    reference_kinds,
    references_in,
)

__all__ = ["LintMessage", "format_order", "lint_chain"]


@dataclass(frozen=True)
class LintMessage:
    """One finding: ``level`` is ``"error"`` (blocks saving) or ``"warning"``."""

    id: str
    level: str
    message: str
    hint: str = ""

    @property
    def is_error(self) -> bool:
        return self.level == "error"

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip()


def format_order(order: int | None) -> str:
    """``-2147483448`` → ``"HIGHEST+200"``; orders near the ends read better relative to them."""
    if order is None:
        return "default"
    if order - HIGHEST_PRECEDENCE <= 1_000_000:
        return "HIGHEST" if order == HIGHEST_PRECEDENCE else f"HIGHEST+{order - HIGHEST_PRECEDENCE}"
    if LOWEST_PRECEDENCE - order <= 1_000_000:
        return "LOWEST" if order == LOWEST_PRECEDENCE else f"LOWEST-{LOWEST_PRECEDENCE - order}"
    return str(order)


@dataclass(frozen=True)
class _Row:
    label: str
    type: AdvisorType
    order: int
    position: int
    params: dict[str, Any]


def _label(index: int, row: Any) -> str:
    return f"advisor #{index + 1} ({row.advisor_type})"


def _error(id_: str, message: str, hint: str = "") -> LintMessage:
    return LintMessage(id_, "error", message, hint)


def _warning(id_: str, message: str, hint: str = "") -> LintMessage:
    return LintMessage(id_, "warning", message, hint)


def lint_chain(advisors: Iterable[Any]) -> list[LintMessage]:
    """Lint a chain's advisor rows (saved or not: anything with the model's attributes).

    Each row needs ``advisor_type``, ``order``, ``enabled`` and ``params``. Rows are taken in
    their saved order (equal orders keep it). Runs queries to check references.
    """
    messages: list[LintMessage] = []
    rows: list[_Row] = []
    for index, row in enumerate(advisors):
        label = _label(index, row)
        advisor_type = advisor_types.get(row.advisor_type)
        if advisor_type is None:
            messages.append(
                _error(
                    "advisors_app.E108",
                    f"{label}: unknown advisor type {row.advisor_type!r}.",
                    "Registered types: " + (", ".join(t.key for t in advisor_types) or "none"),
                )
            )
            continue
        errors = params_errors(row.advisor_type, row.params)
        if errors:
            details = "; ".join(f"{f}: {' '.join(m)}" for f, m in errors.items())
            messages.append(_error("advisors_app.E109", f"{label}: invalid params: {details}"))
            continue
        order = advisor_type.default_order if row.order is None else row.order
        if not HIGHEST_PRECEDENCE <= order <= LOWEST_PRECEDENCE:
            messages.append(
                _error(
                    "advisors_app.E107",
                    f"{label}: order {order} is out of range.",
                    f"Use {HIGHEST_PRECEDENCE} (HIGHEST) to {LOWEST_PRECEDENCE} (LOWEST).",
                )
            )
            continue
        messages.extend(_reference_messages(label, advisor_type, row.params))
        if row.enabled:
            messages.extend(_empty_guard_messages(label, advisor_type, row.params))
            rows.append(_Row(label, advisor_type, order, index, dict(row.params)))
    rows.sort(key=lambda r: (r.order, r.position))
    messages.extend(_structure_messages(rows))
    return messages


def _reference_messages(label: str, advisor_type: AdvisorType, params: Any) -> list[LintMessage]:
    messages = []
    properties = advisor_type.params_schema.get("properties", {})
    for param, kind_key, slug in references_in(advisor_type, params):
        kind = reference_kinds.get(kind_key)
        row = None
        if kind is not None:
            model = apps.get_model(kind.model)
            row = model._default_manager.filter(slug=slug).first()
        if row is None:
            what = kind.label if kind else kind_key
            messages.append(
                _error(
                    "advisors_app.E110",
                    f"{label}: params.{param}: no {what} with slug {slug!r}.",
                    f"Create the {what} or choose an existing one.",
                )
            )
            continue
        if kind_key == "prompt_template":
            required = properties.get(param, {}).get("x-required-placeholders")
            messages.extend(_template_messages(f"{label}: params.{param}", row, required))
    return messages


def _template_messages(where: str, template: Any, required: list[str] | None) -> list[LintMessage]:
    """E106 for a stored template with an unpaired brace (a template saved before the admin
    refused them) or without the placeholders its advisor requires."""
    try:
        assert_balanced_braces(template.text)
    except ValueError as exc:
        hint = "Fix the template text; write {{ and }} for literal braces."
        return [_error("advisors_app.E106", f"{where}: template {template.slug!r}: {exc}", hint)]
    if required:
        try:
            assert_placeholders(template.text, required)
        except ValueError as exc:
            hint = "Add the placeholders to the template text."
            message = f"{where}: template {template.slug!r}: {exc}"
            return [_error("advisors_app.E106", message, hint)]
    return []


def _takes_word_lists(advisor_type: AdvisorType) -> bool:
    for prop in advisor_type.params_schema.get("properties", {}).values():
        if not isinstance(prop, Mapping):
            continue
        items = prop.get("items")
        items_kind = items.get("x-reference") if isinstance(items, Mapping) else None
        if "word_list" in (prop.get("x-reference"), items_kind):
            return True
    return False


def _empty_guard_messages(label: str, advisor_type: AdvisorType, params: Any) -> list[LintMessage]:
    """W112 for a guard whose word lists and inline ``words`` (SafeGuard's) hold no word."""
    if "guard" not in advisor_type.roles or not _takes_word_lists(advisor_type):
        return []
    if any(str(w).strip() for w in params.get("words") or ()):
        return []
    slugs = [s for _, kind, s in references_in(advisor_type, params) if kind == "word_list"]
    word_lists = apps.get_model("advisors_app", "SensitiveWordList")._default_manager
    lists = list(word_lists.filter(slug__in=slugs))
    if len(lists) < len(set(slugs)):
        return []  # a missing list is E110's
    if any(str(w).strip() for found in lists for w in found.words):
        return []
    named = ", ".join(repr(s) for s in slugs) if slugs else "none"
    return [
        _warning(
            "advisors_app.W112",
            f"{label}: the guard has no word to block (word lists: {named}; no inline words): "
            "it lets every message through.",
            "Add words to its word lists or to params.words, or disable the advisor.",
        )
    ]


def _with_role(rows: Sequence[_Row], role: str) -> list[_Row]:
    return [r for r in rows if role in r.type.roles]


def _describe(row: _Row) -> str:
    return f"{row.label} at order {format_order(row.order)}"


def _structure_messages(rows: list[_Row]) -> list[LintMessage]:
    messages = []
    tools = _with_role(rows, "tool")
    memories = _with_role(rows, "memory")
    position = {id(r): i for i, r in enumerate(rows)}
    if len(tools) > 1:
        messages.append(
            _error(
                "advisors_app.E101",
                f"At most one ToolAdvisor is allowed in the advisor chain, but found "
                f"{len(tools)}: {', '.join(_describe(r) for r in tools)}.",
                "Disable or remove all but one tool advisor.",
            )
        )
    for tool in tools[:1]:
        for memory in memories:
            if position[id(memory)] > position[id(tool)]:
                messages.append(
                    _error(
                        "advisors_app.E102",
                        f"{_describe(memory)} runs inside the tool loop ({_describe(tool)}): "
                        "it would store every tool round.",
                        "Give the memory advisor a smaller order than the tool advisor "
                        "(default HIGHEST+200 < HIGHEST+300).",
                    )
                )
    for memory in memories[:1]:
        for guard in _with_role(rows, "guard"):
            if position[id(guard)] > position[id(memory)]:
                messages.append(
                    _warning(
                        "advisors_app.W103",
                        f"{_describe(guard)} runs inside {_describe(memory)}: blocked input "
                        "would be remembered and replayed to the guard on later turns.",
                        "Give the guard a smaller order than the memory advisor "
                        "(e.g. HIGHEST+100).",
                    )
                )
        for rag in _with_role(rows, "rag"):
            if position[id(rag)] < position[id(memory)]:
                messages.append(
                    _warning(
                        "advisors_app.W104",
                        f"{_describe(rag)} runs outside {_describe(memory)}: memory receives "
                        "the prompt after retrieval and stores the whole augmented prompt "
                        "(the user's message plus every retrieved excerpt) as the user's "
                        "message, sending it again with each later turn; retrieval cannot "
                        "see the conversation history either.",
                        "Give the memory advisor a smaller order than the retrieval advisor "
                        "(memory's default HIGHEST+200, retrieval at HIGHEST+250 or 0), so "
                        "memory stores what the user typed.",
                    )
                )
    for row in rows:
        if row.type.after_side_effects and not row.type.stream_safe:
            messages.append(
                _error(
                    "advisors_app.E105",
                    f"{_describe(row)}: its after() has side effects but it is not stream-safe "
                    "(in a stream the side effect would run per chunk or not at all).",
                    "Disable it for streaming chains or use a stream-safe advisor type.",
                )
            )
    return messages
