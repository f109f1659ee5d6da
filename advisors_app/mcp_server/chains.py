"""Which chains a caller may ask over MCP, under which tool names, with which input schema.

Blocking (ORM, chain building): the MCP handlers run these through ``sync_to_async``. No MCP
SDK import here: the tool descriptions are plain JSON-compatible data the server turns into
the SDK's types.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from advisors_app.conf import app_settings
from advisors_app.definition import ChainConfigurationError
from advisors_app.definition.runtime import ChainNotFound, VersionNotFound, load_chain
from advisors_app.models import PRODUCTION, AdvisorChain

__all__ = [
    "ARGUMENTS",
    "OUTPUT_SCHEMA",
    "ChainTool",
    "chain_for_tool",
    "chain_tools",
    "input_schema",
    "tool_names",
]

#: The arguments of every ``ask_<slug>`` tool (a subset of the REST turn's fields: label,
#: version and approval decisions are not offered over MCP).
ARGUMENTS = ("message", "conversation_id", "params")

#: Longest tool name handed out: the MCP limit is 128, but models' function-calling APIs
#: (OpenAI's, Gemini's) stop at 64, and MCP clients pass tool names on to them.
MAX_TOOL_NAME = 64
_NOT_NAME = re.compile(r"[^A-Za-z0-9_]")

#: ``structuredContent`` of a successful call (clients validate it against this).
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "conversation_id": {
            "type": ["string", "null"],
            "description": "Pass it back as conversation_id to continue the conversation.",
        },
        "message_id": {"type": ["integer", "null"], "description": "The stored reply's id."},
        "finish_reason": {"type": ["string", "null"]},
        "finish_category": {
            "type": ["string", "null"],
            "description": "Why the answer ended, provider-neutral: stop, length, tool_calls, "
            "content_filter, guardrail (a guard refused), approval_required, cancelled, error.",
        },
        "trace_id": {"type": "string", "description": "Names the turn in the call logs."},
        "version": {"type": ["integer", "null"], "description": "The chain version that ran."},
        "sources": {
            "type": "array",
            "items": {"type": "object"},
            "description": "The documents retrieval cited (document_id, title, source, score, "
            "snippet); only when the chain retrieved any.",
        },
    },
    "required": ["conversation_id", "message_id", "finish_reason", "trace_id", "version"],
}


@dataclass(frozen=True, slots=True)
class ChainTool:
    """One chain as an MCP tool: ``name`` (``ask_<slug>``), the chain's ``slug``, ``title``
    and ``description``, and the JSON Schema of its ``params`` (what ``production`` accepts)."""

    name: str
    slug: str
    title: str
    description: str
    params_schema: dict[str, Any]

    @property
    def input_schema(self) -> dict[str, Any]:
        return input_schema(self.params_schema)


def tool_names(slugs: list[str]) -> dict[str, str]:
    """Tool name → slug for ``slugs``: ``ask_`` + the slug with ``-`` as ``_``; a name past
    :data:`MAX_TOOL_NAME` characters, or one two slugs share (``a-b``, ``a_b``), ends in a
    short hash of its slug instead, so each name stays the same whatever other chains exist."""
    plain: dict[str, list[str]] = {}
    for slug in slugs:
        plain.setdefault("ask_" + _NOT_NAME.sub("_", slug), []).append(slug)
    names: dict[str, str] = {}
    for name, owners in plain.items():
        for slug in owners:
            if len(owners) == 1 and len(name) <= MAX_TOOL_NAME:
                names[name] = slug
            else:
                digest = hashlib.sha256(slug.encode()).hexdigest()[:8]
                names[f"{name[: MAX_TOOL_NAME - 9]}_{digest}"] = slug
    return names


def _offered(user: Any) -> list[tuple[str, str, str]]:
    """``(slug, name, description)`` of the enabled chains with a ``production`` label, by
    slug (none for an anonymous caller). Blocking: one query."""
    if not getattr(user, "is_authenticated", False):
        return []
    rows = AdvisorChain.objects.filter(enabled=True, labels__name=PRODUCTION).order_by("slug")
    return list(rows.values_list("slug", "name", "description"))


def chain_tools(user: Any) -> list[ChainTool]:
    """The chains ``user`` may ask, by slug: enabled chains whose ``production`` label points
    at a version that builds — what the REST API lets anyone but staff call, and MCP calls
    only ``production`` (a chain that cannot run is left out rather than offered to fail).
    Blocking: one query, plus building each chain not built yet in this process."""
    rows = _offered(user)
    names = {slug: name for name, slug in tool_names([slug for slug, _, _ in rows]).items()}
    tools = []
    for slug, title, description in rows:
        try:
            schema = dict(load_chain(slug).params_schema)
        except (ChainNotFound, VersionNotFound, ChainConfigurationError):
            continue
        tools.append(ChainTool(names[slug], slug, title, _description(title, description), schema))
    return tools


def chain_for_tool(user: Any, name: str) -> str | None:
    """The slug of the chain tool ``name`` asks, if ``user`` may ask it (``None``: no such
    tool). Blocking: one query; the chain itself is built by the turn, which says why when it
    cannot run."""
    return tool_names([slug for slug, _, _ in _offered(user)]).get(name)


def _description(title: str, description: str) -> str:
    about = description.strip() or f"Ask the {title} assistant."
    return (
        f"{about}\n\nAnswers the message. To continue a conversation, pass the "
        "conversation_id of an earlier answer (from its structured content)."
    )


def input_schema(params_schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's input: ``message`` (required), ``conversation_id``, ``params`` (the
    chain's params schema); nothing else."""
    params = {
        **params_schema,
        "description": "Per-request params: options (temperature, max_tokens, ...), "
        "system_params and the chain's own (see the properties).",
    }
    return {
        "type": "object",
        "properties": {
            "message": {
                "type": "string",
                "minLength": 1,
                "maxLength": app_settings.MAX_MESSAGE_CHARS,
                "description": "The user's message.",
            },
            "conversation_id": {
                "type": "string",
                "description": "Continue this conversation (the conversation_id of an earlier "
                "answer); omit it to start one.",
            },
            "params": params,
        },
        "required": ["message"],
        "additionalProperties": False,
    }
