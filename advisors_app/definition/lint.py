"""Chain lint: mistakes in a chain's snapshot, found before a request runs. Reads no database.

Runs on the draft when a chain is saved (admin, API: errors block the save, warnings are
shown), before publishing, and in ``manage.py check --database default`` (every chain's draft
and every labelled version). Each rule has a stable id of its own (``docs/checks.md`` lists them
with the system checks'):

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
- ``advisors_app.E106``: a template lacks a placeholder its advisor requires.
- ``advisors_app.E107``: an order outside ``HIGHEST_PRECEDENCE..LOWEST_PRECEDENCE``.
- ``advisors_app.E108``: an unregistered advisor type.
- ``advisors_app.E109``: params that do not match the type's JSON Schema.
- ``advisors_app.E110``: a reference to a row that does not exist (word list, template, ...).
- ``advisors_app.E111``: a tool that is not registered.
- ``advisors_app.W112``: a guard that takes word lists has no word at all (its lists are empty
  and it has no inline ``words``): it blocks nothing.
- ``advisors_app.E113``: the chain cannot be built: an advisor type's factory (a project's
  own included) or the chat model refused the configuration (reported by
  :func:`advisors_app.definition.check`, which compiles after linting).
- ``advisors_app.W114``: an advisor that rewrites the user message runs inside a retrieval
  advisor: it rewrites, and sends again, the whole retrieved context.
- ``advisors_app.E115``: default options the chat options do not accept.
- ``advisors_app.E116``: session memory out of place (Spring AI 2.1): its turn advisor (the
  row's order) must run outside the tool loop and its memory advisor (``memory_order``) inside
  it — or, in a chain without a tool loop, inside the turn advisor.
- ``advisors_app.E117``: session memory combined with a 2.0 memory advisor
  (``message_chat_memory``, ``prompt_chat_memory``): both would store every turn.
- ``advisors_app.E118``: two tools with one name: an MCP tool (after its prefix) named like a
  registered Python tool or like another enabled MCP tool (of another server, or the same
  server enabled twice); the model could not tell them apart.
- ``advisors_app.E119``: an MCP tool the chain enables that its server does not list.
- ``advisors_app.E120``: an MCP server whose tools are not known: disabled, unreachable or
  misconfigured when the draft was resolved (the message says which).
- ``advisors_app.E121``: an MCP tool whose name as offered (prefix + tool) is not a function
  name model APIs accept: 1 to 64 letters, digits, ``_`` and ``-`` (OpenAI's rule).
- ``advisors_app.E122``: two 2.0 memory advisors (``message_chat_memory``,
  ``prompt_chat_memory``) on one chain: both store every turn in the same conversation, so
  its transcript holds each message twice.
- ``advisors_app.W124``: a guard with ``documents`` or tool rails runs inside the advisor that
  meets their texts (a retrieval advisor, the tool loop): it never screens them.
- ``advisors_app.E123``: a template has a brace left unpaired (saved by code, or before the
  admin refused them).

"Inside" means later in the chain's execution order (larger order; equal orders keep the
rows' saved order).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from advisors_app.core.advisor import (
    DEFAULT_TOOL_CALLING_ORDER,
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
)
from advisors_app.core.templates import assert_balanced_braces, assert_placeholders
from advisors_app.definition.registry import (
    AdvisorType,
    advisor_types,
    params_errors,
    reference_kinds,
    references_in,
    with_defaults,
)
from advisors_app.definition.tools import tool_registry
from advisors_app.mcp import mcp_tool_uses
from advisors_app.orders import format_order, parse_order
from advisors_app.validation import chat_options_errors

__all__ = ["LintMessage", "advisor_label", "lint"]

#: The role of advisors that rewrite the user message (see W114).
REWRITE_ROLE = "rewrite"


@dataclass(frozen=True)
class LintMessage:
    """One finding: ``level`` is ``"error"`` (blocks saving and publishing) or ``"warning"``."""

    id: str
    level: str
    message: str
    hint: str = ""

    @property
    def is_error(self) -> bool:
        return self.level == "error"

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip()

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "level": self.level, "message": self.message, "hint": self.hint}


@dataclass(frozen=True)
class _Row:
    label: str
    type: AdvisorType
    order: int
    params: dict[str, Any]


def advisor_label(index: int, advisor: Mapping[str, Any]) -> str:
    """How messages name the snapshot's advisor ``index``: ``advisor #2 (safe_guard)``."""
    return f"advisor #{index + 1} ({advisor['type']})"


def _error(id_: str, message: str, hint: str = "") -> LintMessage:
    return LintMessage(id_, "error", message, hint)


def _warning(id_: str, message: str, hint: str = "") -> LintMessage:
    return LintMessage(id_, "warning", message, hint)


def lint(snapshot: Mapping[str, Any]) -> list[LintMessage]:
    """Every finding of the chain a snapshot describes (see the module docstring)."""
    references: Mapping[str, Any] = snapshot["references"]
    messages = _chain_messages(snapshot)
    rows: list[_Row] = []
    for index, advisor in enumerate(snapshot["advisors"]):
        label = advisor_label(index, advisor)
        advisor_type = advisor_types.get(advisor["type"])
        if advisor_type is None:
            messages.append(
                _error(
                    "advisors_app.E108",
                    f"{label}: unknown advisor type {advisor['type']!r}.",
                    "Registered types: " + (", ".join(advisor_types.keys) or "none"),
                )
            )
            continue
        params = advisor["params"]
        errors = params_errors(advisor["type"], params)
        if errors:
            details = "; ".join(f"{f}: {' '.join(m)}" for f, m in errors.items())
            messages.append(_error("advisors_app.E109", f"{label}: invalid params: {details}"))
            continue
        order = advisor["order"]
        if not HIGHEST_PRECEDENCE <= order <= LOWEST_PRECEDENCE:
            messages.append(
                _error(
                    "advisors_app.E107",
                    f"{label}: order {order} is out of range.",
                    f"Use {HIGHEST_PRECEDENCE} (HIGHEST) to {LOWEST_PRECEDENCE} (LOWEST).",
                )
            )
            continue
        if advisor["enabled"]:
            messages.extend(_reference_messages(label, advisor_type, params, references))
            messages.extend(_empty_guard_messages(label, advisor_type, params, references))
            rows.append(_Row(label, advisor_type, order, dict(params)))
    messages.extend(_mcp_messages(snapshot))
    messages.extend(_structure_messages(rows))
    messages.extend(_session_messages(rows, bool(snapshot["tools"])))
    messages.extend(_chat_memory_messages(rows))
    return messages


def _chain_messages(snapshot: Mapping[str, Any]) -> list[LintMessage]:
    """The chain's own settings: model, system template, default options, tools."""
    messages = []
    references = snapshot["references"]
    model = snapshot["chat_model"]
    if model is not None and references.get(f"chat_model:{model}") is None:
        messages.append(_missing("chat_model", "chat_model", model))
    template = snapshot["system_template"]
    if template:
        messages.extend(_template_messages("system template", template, references, required=None))
    for field, problems in chat_options_errors(snapshot["default_options"], "").items():
        for problem in problems:
            messages.append(
                _error(
                    "advisors_app.E115",
                    f"default_options: {field + ': ' if field else ''}{problem}",
                )
            )
    unknown = [tool["name"] for tool in snapshot["tools"] if tool.get("registered") is False]
    if unknown:
        listing = ", ".join(sorted(tool_registry.names)) or "none"
        messages.append(
            _error(
                "advisors_app.E111",
                f"unknown tool(s): {', '.join(unknown)}.",
                f"Registered tools: {listing}.",
            )
        )
    return messages


def _reference_messages(
    label: str, advisor_type: AdvisorType, params: Any, references: Mapping[str, Any]
) -> list[LintMessage]:
    messages = []
    properties = advisor_type.params_schema.get("properties", {})
    for param, kind_key, slug in references_in(advisor_type, params):
        if kind_key == "prompt_template":
            required = properties.get(param, {}).get("x-required-placeholders")
            messages.extend(
                _template_messages(f"{label}: params.{param}", slug, references, required)
            )
        elif references.get(f"{kind_key}:{slug}") is None:
            messages.append(_missing(f"{label}: params.{param}", kind_key, slug))
    return messages


def _missing(where: str, kind_key: str, slug: str) -> LintMessage:
    kind = reference_kinds.get(kind_key)
    what = kind.label if kind else kind_key
    return _error(
        "advisors_app.E110",
        f"{where}: no {what} with slug {slug!r}.",
        f"Create the {what} or choose an existing one.",
    )


def _template_messages(
    where: str, slug: str, references: Mapping[str, Any], required: list[str] | None
) -> list[LintMessage]:
    """E110 for a missing template; E123 for one with an unpaired brace (saved before the
    admin refused them); E106 for one without the placeholders its advisor requires."""
    found = references.get(f"prompt_template:{slug}")
    if found is None:
        return [_missing(where, "prompt_template", slug)]
    try:
        assert_balanced_braces(found["text"])
    except ValueError as exc:
        hint = "Fix the template text; write {{ and }} for literal braces."
        return [_error("advisors_app.E123", f"{where}: template {slug!r}: {exc}", hint)]
    if required:
        try:
            assert_placeholders(found["text"], required)
        except ValueError as exc:
            hint = "Add the placeholders to the template text."
            return [_error("advisors_app.E106", f"{where}: template {slug!r}: {exc}", hint)]
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


def _empty_guard_messages(
    label: str, advisor_type: AdvisorType, params: Any, references: Mapping[str, Any]
) -> list[LintMessage]:
    """W112 for a guard whose word lists and inline ``words`` (SafeGuard's) hold no word."""
    if "guard" not in advisor_type.roles or not _takes_word_lists(advisor_type):
        return []
    if "rails" in params:
        return []  # guard rails: word lists serve only their words checks; others need none
    if any(str(w).strip() for w in params.get("words") or ()):
        return []
    slugs = [s for _, kind, s in references_in(advisor_type, params) if kind == "word_list"]
    lists = [references.get(f"word_list:{slug}") for slug in slugs]
    if any(found is None for found in lists):
        return []  # a missing list is E110's
    if any(str(w).strip() for found in lists for w in found["words"]):  # type: ignore[index]
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


#: Guard rails screened by the advisors of a role, which must run inside the guard (W124).
_RAILS_MET_BY = {"documents": "rag", "tool_arguments": "tool", "tool_results": "tool"}


def _guard_rail_messages(rows: list[_Row], position: Mapping[int, int]) -> list[LintMessage]:
    """W124: a guard's documents or tool rails ordered inside the advisor that screens them
    with its session (it only reaches advisors inside the guard)."""
    messages = []
    for guard in rows:
        rails = guard.params.get("rails")
        if not isinstance(rails, Mapping):
            continue
        for rail, role in _RAILS_MET_BY.items():
            if not rails.get(rail):
                continue
            for outer in _with_role(rows, role):
                if position[id(outer)] < position[id(guard)]:
                    messages.append(
                        _warning(
                            "advisors_app.W124",
                            f"{_describe(guard)} has a {rail} rail but runs inside "
                            f"{_describe(outer)}, which screens that rail's texts with the "
                            "guard it runs inside: the rail never sees them.",
                            f"Give {guard.label} a smaller order than {outer.label} "
                            "(the guard's default HIGHEST+100).",
                        )
                    )
    return messages


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
    for rag in _with_role(rows, "rag")[:1]:
        for rewriter in _with_role(rows, REWRITE_ROLE):
            if rewriter is not rag and position[id(rewriter)] > position[id(rag)]:
                messages.append(
                    _warning(
                        "advisors_app.W114",
                        f"{_describe(rewriter)} rewrites the user message inside "
                        f"{_describe(rag)}: by then the message holds every retrieved excerpt, "
                        "so it rewrites and sends again the whole retrieved context.",
                        f"Give {rewriter.label} a smaller order than {rag.label} "
                        f"(below {format_order(rag.order)}), so it sees what the user typed.",
                    )
                )
    messages.extend(_guard_rail_messages(rows, position))
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


#: The row type that installs session memory, and the 2.0 memory types it cannot sit beside.
SESSION_MEMORY = "session_memory"
CHAT_MEMORY_TYPES = ("message_chat_memory", "prompt_chat_memory")


def _session_messages(rows: list[_Row], has_tools: bool) -> list[LintMessage]:
    """E116 and E117 (see the module docstring)."""
    sessions = [r for r in rows if r.type.key == SESSION_MEMORY]
    if not sessions:
        return []
    messages = []
    tools = _with_role(rows, "tool")
    loop = tools[0].order if tools else (DEFAULT_TOOL_CALLING_ORDER if has_tools else None)
    for row in sessions:
        misplaced = _session_placement(row, loop)
        if misplaced:
            messages.append(_error("advisors_app.E116", *misplaced))
        for other in rows:
            if other.type.key in CHAT_MEMORY_TYPES:
                messages.append(
                    _error(
                        "advisors_app.E117",
                        f"{_describe(row)} is combined with {_describe(other)}: both would "
                        "store every turn of the conversation.",
                        "Keep one memory: session memory, or the 2.0 memory advisor "
                        "(its compatibility layer).",
                    )
                )
    return messages


def _session_placement(row: _Row, loop: int | None) -> tuple[str, str] | None:
    """E116's message and hint when session memory's two advisors are out of place: the turn
    advisor (the row's order) outside the tool loop (order ``loop``; ``None``: no loop) and
    the memory advisor (``memory_order``) inside it, or inside the turn advisor."""
    inner = parse_order(with_defaults(row.type, row.params)["memory_order"])
    if loop is not None and not row.order < loop < inner:
        return (
            f"{_describe(row)} with memory_order {format_order(inner)}: session memory "
            f"needs its turn advisor outside the tool loop (order {format_order(loop)}) and "
            "its memory advisor inside it.",
            "Give the row an order below the tool loop's (default HIGHEST+200) and "
            "memory_order above it (default HIGHEST+301).",
        )
    if loop is None and not row.order < inner:
        return (
            f"{_describe(row)}: memory_order {format_order(inner)} must be larger than the "
            "row's order (the memory advisor runs inside the turn advisor).",
            "Leave memory_order at its default (HIGHEST+301).",
        )
    return None


def _chat_memory_messages(rows: list[_Row]) -> list[LintMessage]:
    """E122 (see the module docstring): each 2.0 memory row after the first."""
    memories = [r for r in rows if r.type.key in CHAT_MEMORY_TYPES]
    return [
        _error(
            "advisors_app.E122",
            f"{_describe(row)} is combined with {_describe(memories[0])}: both would store "
            "every turn in the same conversation (each message twice).",
            "Keep one memory advisor; disable or delete the other row.",
        )
        for row in memories[1:]
    ]


#: A function name model APIs accept (OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``).
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def _mcp_messages(snapshot: Mapping[str, Any]) -> list[LintMessage]:
    """E118 to E121 (see the module docstring); a missing server is E110's."""
    messages = []
    references = snapshot["references"]
    seen: dict[str, str] = {}
    unknown_servers: set[str] = set()
    for use in mcp_tool_uses(snapshot):
        where = f"{advisor_label(use.row, snapshot['advisors'][use.row])}: params.mcp_servers"
        content = references.get(f"mcp_server:{use.server}")
        if content is None:
            continue
        if content.get("tools") is None:
            if use.server not in unknown_servers:
                unknown_servers.add(use.server)
                messages.append(
                    _error(
                        "advisors_app.E120",
                        f"{where}: the tools of MCP server {use.server!r} are not known: "
                        f"{content.get('error') or 'not listed'}.",
                        "Enable the server, check its URL, command and environment variables, "
                        "then save the chain again.",
                    )
                )
            continue
        if not any(tool["name"] == use.tool for tool in content["tools"]):
            messages.append(
                _error(
                    "advisors_app.E119",
                    f"{where}: MCP server {use.server!r} has no tool {use.tool!r}.",
                    "Remove it from the list, or use a name the server lists (its admin page "
                    "shows them).",
                )
            )
        if not TOOL_NAME.match(use.name):
            messages.append(
                _error(
                    "advisors_app.E121",
                    f"{where}: tool {use.tool!r} of MCP server {use.server!r} would be offered "
                    f"as {use.name!r}, which is not a tool name model APIs accept (1 to 64 "
                    "letters, digits, _ and -).",
                    "Shorten the prefix (params.mcp_servers[].prefix) or use only letters, "
                    "digits, _ and - in it.",
                )
            )
        source = f"tool {use.tool!r} of MCP server {use.server!r}"
        other = seen.get(use.name)
        if use.name in tool_registry:
            other = f"the registered Python tool {use.name!r}"
        if other is not None:
            messages.append(
                _error(
                    "advisors_app.E118",
                    f"{where}: {source} is offered as {use.name!r}, like {other}.",
                    "Give the server a prefix (params.mcp_servers[].prefix) or drop one of them.",
                )
            )
        seen.setdefault(use.name, source)
    return messages
