"""What a chain snapshot keeps of an MCP server, discovered when the draft is resolved.

The reference kind ``mcp_server`` (registered by :func:`register_mcp_reference_kind`) resolves
a slug to a row (streamable HTTP) or, with no row, to a stdio server of
``ADVISORS["MCP_SERVERS"]``. Its content is the row's configuration (headers by variable name)
and ``tools``: the server's tool list as discovered now (cached for the TTL), or ``None`` with
``error`` when the server is disabled or cannot be listed — the chain lint then refuses to
publish (``E120``). :func:`pin_mcp_tools` keeps in each server's content only the tools the
chain enables, so a tool the chain does not use never makes its draft differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from advisors_app.definition.registry import ReferenceKind, reference_kinds

from .config import McpConfigurationError, ServerConfig, stdio_config
from .pool import McpServerError, mcp_pool
from .tools import mcp_tool_uses

__all__ = ["pin_mcp_tools", "register_mcp_reference_kind", "server_config"]


def server_config(slug: str) -> ServerConfig | None:
    """The server ``slug`` names now: a stdio settings entry, else an HTTP row; ``None``
    when neither exists. Raises :class:`McpConfigurationError` for a bad settings entry."""
    config = stdio_config(slug)
    if config is not None:
        return config
    from advisors_app.models import McpServer

    row = McpServer.objects.filter(slug=slug).first()
    return None if row is None else ServerConfig.from_content(slug, row.to_config())


def _with_tools(config: ServerConfig, content: dict[str, Any]) -> dict[str, Any]:
    try:
        tools = mcp_pool.list_tools_sync(config)
    except (McpServerError, McpConfigurationError) as exc:
        return {**content, "tools": None, "error": str(exc)}
    return {**content, "tools": [tool.to_dict() for tool in tools]}


def _row_content(row: Any) -> dict[str, Any]:
    content = row.to_config()
    if not row.enabled:
        return {**content, "tools": None, "error": f"MCP server {row.slug!r} is disabled"}
    return _with_tools(ServerConfig.from_content(row.slug, content), content)


def _stdio_content(slug: str) -> dict[str, Any] | None:
    try:
        config = stdio_config(slug)
    except McpConfigurationError as exc:
        return {"transport": "stdio", "tools": None, "error": str(exc)}
    # The command stays in the settings: a snapshot holds what the chain sees, the tools.
    return None if config is None else _with_tools(config, {"transport": "stdio"})


def register_mcp_reference_kind() -> None:
    """Register the ``mcp_server`` reference kind (idempotent; ``AdvisorsAppConfig.ready()``)."""
    reference_kinds.register(
        ReferenceKind(
            "mcp_server",
            "MCP server",
            "advisors_app.McpServer",
            _row_content,
            missing=_stdio_content,
        )
    )


def pin_mcp_tools(snapshot: dict[str, Any]) -> None:
    """Keep in each ``mcp_server`` reference of ``snapshot`` only the tools its rows enable,
    sorted by name (in place)."""
    enabled: dict[str, set[str]] = {}
    for use in mcp_tool_uses(snapshot):
        enabled.setdefault(use.server, set()).add(use.tool)
    references: dict[str, Any] = snapshot["references"]
    for ref, content in references.items():
        kind, _, slug = ref.partition(":")
        if kind != "mcp_server" or not isinstance(content, Mapping):
            continue
        tools = content.get("tools")
        if tools is not None:
            wanted = enabled.get(slug, set())
            kept = sorted((t for t in tools if t["name"] in wanted), key=lambda t: t["name"])
            references[ref] = {**content, "tools": kept}
