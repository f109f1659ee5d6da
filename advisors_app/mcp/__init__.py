"""Chains using tools of MCP servers (Model Context Protocol; Spring AI 2.1's MCP client).

- :mod:`.config`: where a server is (:class:`ServerConfig`; stdio servers in settings only);
- :mod:`.pool`: pooled connections on one background loop, discovery with a TTL refreshed on
  the server's list-changed notice, calls with a timeout;
- :mod:`.discovery`: the ``mcp_server`` reference kind (tools pinned into snapshots);
- :mod:`.tools`: :class:`McpToolCallback` and the callbacks a snapshot enables.

Built on the official SDK (``mcp``); install the ``mcp`` extra.
"""

from __future__ import annotations

from .config import McpConfigurationError, ServerConfig, stdio_config
from .pool import McpServerError, McpTool, close_mcp_connections, mcp_pool
from .tools import McpToolCallback, McpToolError, mcp_tool_callbacks, mcp_tool_uses

__all__ = [
    "McpConfigurationError",
    "McpServerError",
    "McpTool",
    "McpToolCallback",
    "McpToolError",
    "ServerConfig",
    "close_mcp_connections",
    "mcp_pool",
    "mcp_tool_callbacks",
    "mcp_tool_uses",
    "stdio_config",
]
