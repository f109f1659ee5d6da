"""Admin of MCP servers (streamable HTTP): URL, headers by environment variable, timeouts.

stdio servers are not here on purpose: a command line editable in the admin would let an admin
account run programs on the server; they live in ``ADVISORS["MCP_SERVERS"]`` (the changelist
names them). The change page shows the tools the server lists now (discovered through the
process's pool, cached for the TTL) and which header variables are set — never their values.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db import models
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from advisors_app.admin.protected import ReferencedByVersionsAdmin
from advisors_app.admin.widgets import TEXTAREA_OVERRIDES
from advisors_app.conf import app_settings
from advisors_app.mcp import McpConfigurationError, McpServerError, ServerConfig, mcp_pool
from advisors_app.models import McpServer

__all__ = ["McpServerAdmin"]


@admin.register(McpServer)
class McpServerAdmin(ReferencedByVersionsAdmin):
    """Streamable-HTTP MCP servers chains may take tools from."""

    list_display = ("slug", "name", "url", "enabled", "header_variables", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("slug", "name", "url")
    readonly_fields = ("header_variables", "discovered_tools")
    fields = (
        "slug",
        "name",
        "url",
        "headers",
        "header_variables",
        "connect_timeout",
        "call_timeout",
        "enabled",
        "discovered_tools",
    )
    formfield_overrides = {**TEXTAREA_OVERRIDES, models.URLField: {"assume_scheme": "https"}}

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> Any:
        stdio = sorted(app_settings.MCP_SERVERS)
        if stdio:
            # Slugs only: their command lines are the settings' business, not the admin's.
            messages.info(
                request,
                "stdio servers from ADVISORS['MCP_SERVERS'] (not editable here): "
                + ", ".join(stdio),
            )
        return super().changelist_view(request, extra_context)

    @admin.display(description="Header variables")
    def header_variables(self, obj: McpServer) -> str:
        return obj.env_status

    @admin.display(description="Tools the server lists")
    def discovered_tools(self, obj: McpServer) -> str:
        if obj.pk is None:
            return "Save the server to list its tools."
        if not obj.enabled:
            return "Disabled."
        try:
            tools = mcp_pool.list_tools_sync(ServerConfig.from_content(obj.slug, obj.to_config()))
        except (McpServerError, McpConfigurationError) as exc:
            return format_html('<span style="color:#ba2121">{}</span>', str(exc))
        if not tools:
            return "The server lists no tool."
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "", "<li><code>{}</code> — {}</li>", ((t.name, t.description) for t in tools)
            ),
        )
