"""Chains served as MCP tools: an MCP server endpoint (Streamable HTTP) under the app's URLs.

Each enabled chain the caller may ask is a tool ``ask_<slug>`` (input: ``message``,
``conversation_id``, ``params``) that runs one turn through the turn service, as the REST
``call`` endpoint does; callers authenticate with their REST API token. Off unless
``ADVISORS["MCP_ENDPOINT_ENABLED"]`` is true; the project mounts :class:`MCPEndpoint` in its
``asgi.py`` (``advisors_app.routing.http_urlpatterns``). Needs the ``mcp`` extra (the official
SDK), imported only when the endpoint serves its first request. See ``docs/mcp-server.md``.

Modules: :mod:`~advisors_app.mcp_server.asgi` (the endpoint: token, transport),
:mod:`~advisors_app.mcp_server.server` (the MCP handlers), :mod:`~advisors_app.mcp_server.chains`
(which chains, under which names and schemas).
"""

from __future__ import annotations

from advisors_app.mcp_server.asgi import MCPEndpoint, stop_endpoints

__all__ = ["MCPEndpoint", "stop_endpoints"]
