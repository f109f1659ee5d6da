"""MCP tools as :class:`~advisors_app.core.tools.ToolCallback` objects, built from a snapshot.

A chain's tool loop row (``tool_calling`` or ``tool_search``) enables servers with the param
``"mcp_servers": [{"server": <slug>, "tools": [<names>], "prefix": ""}]``. Publishing pins each
server's listed tools (name, description, input schema) into the snapshot's ``mcp_server``
reference, so :func:`mcp_tool_callbacks` reads only the snapshot: a server that changes its
tools changes the draft (its diff shows it), never a published version. A call goes to the
server through the process's :data:`~advisors_app.mcp.pool.mcp_pool`; what the model sees of a
failure is the tool loop's usual ``"Error executing tool '<name>': <why>"``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from advisors_app.core.tools import ToolArgumentsError, ToolCallback, ToolDefinition

from .config import McpConfigurationError, ServerConfig
from .pool import McpClientPool, mcp_pool

__all__ = [
    "TOOL_LOOP_TYPES",
    "McpToolCallback",
    "McpToolError",
    "McpToolUse",
    "mcp_tool_callbacks",
    "mcp_tool_uses",
]

#: Advisor types whose params may enable MCP servers.
TOOL_LOOP_TYPES = ("tool_calling", "tool_search")


class McpToolError(RuntimeError):
    """Raised when an MCP server answers a tool call with a result flagged ``isError``."""

    #: An expected outcome: the tool loop logs it as one line, without a traceback.
    expected_tool_error = True


class McpToolCallback(ToolCallback):
    """One tool of an MCP server, offered to the model under ``definition.name`` (the server's
    name after the chain's prefix) and called on the server as ``remote_name``.

    Arguments go to the server as the model wrote them (the server validates them against its
    schema); a result is its text content joined by newlines. Raises
    :class:`~advisors_app.core.tools.ToolArgumentsError` for arguments that are not a JSON
    object, :class:`McpToolError` for an ``isError`` result and
    :class:`~advisors_app.mcp.pool.McpServerError` for an unreachable server, a protocol error
    or a timeout — the tool loop sends each to the model as the call's response.
    """

    __slots__ = ("_config", "_definition", "_pool", "remote_name")

    def __init__(
        self,
        config: ServerConfig,
        remote_name: str,
        definition: ToolDefinition,
        pool: McpClientPool = mcp_pool,
    ) -> None:
        self._config = config
        self.remote_name = remote_name
        self._definition = definition
        self._pool = pool

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    @property
    def server(self) -> str:
        return self._config.slug

    async def call(self, arguments: str, tool_context: Mapping[str, Any] | None = None) -> str:
        try:
            parsed = json.loads(arguments.strip() or "{}")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ToolArgumentsError(
                f"invalid arguments for tool '{self.name}': expected a JSON object"
            )
        result = await self._pool.call_tool(self._config, self.remote_name, parsed)
        if result.is_error:
            raise McpToolError(result.text or "the tool reported an error")
        return result.text


@dataclass(frozen=True)
class McpToolUse:
    """One MCP tool a snapshot enables: the loop row's index, the server, the server's name
    of the tool and the name the model sees (``prefix + tool``)."""

    row: int
    server: str
    tool: str
    name: str


def mcp_tool_uses(snapshot: Mapping[str, Any]) -> Iterator[McpToolUse]:
    """Every MCP tool the snapshot's enabled tool-loop rows enable, in row and list order."""
    for index, row in enumerate(snapshot.get("advisors", ())):
        if not row.get("enabled") or row.get("type") not in TOOL_LOOP_TYPES:
            continue
        params = row.get("params")
        entries = params.get("mcp_servers") if isinstance(params, Mapping) else None
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, Mapping) or not isinstance(entry.get("server"), str):
                continue
            prefix = entry.get("prefix") or ""
            for tool in entry.get("tools") or ():
                if isinstance(tool, str):
                    yield McpToolUse(index, entry["server"], tool, f"{prefix}{tool}")


def mcp_tool_callbacks(
    snapshot: Mapping[str, Any], pool: McpClientPool = mcp_pool
) -> tuple[McpToolCallback, ...]:
    """The callbacks of every MCP tool the snapshot enables, from its pinned tool lists.

    Raises :class:`~advisors_app.mcp.config.McpConfigurationError` naming the server and tool
    for a server the snapshot holds no tool list of, or a tool that list lacks (lint reports
    both first: ``E119``, ``E120``).
    """
    references = snapshot.get("references", {})
    callbacks = []
    for use in mcp_tool_uses(snapshot):
        content = references.get(f"mcp_server:{use.server}")
        if content is None or content.get("tools") is None:
            raise McpConfigurationError(f"MCP server {use.server!r}: its tools are not known")
        listed = {tool["name"]: tool for tool in content["tools"]}
        tool = listed.get(use.tool)
        if tool is None:
            raise McpConfigurationError(
                f"MCP server {use.server!r} does not offer a tool {use.tool!r}"
            )
        callbacks.append(
            McpToolCallback(
                ServerConfig.from_content(use.server, content),
                use.tool,
                ToolDefinition(use.name, tool["description"] or use.name, tool["input_schema"]),
                pool,
            )
        )
    return tuple(callbacks)
