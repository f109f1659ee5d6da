"""Where an MCP server is and how to reach it: one :class:`ServerConfig` per slug.

Streamable-HTTP servers are :class:`~advisors_app.models.McpServer` rows (their snapshot
content, once a chain refers to them); stdio servers come from ``ADVISORS["MCP_SERVERS"]``
only. Header values name environment variables (``"Bearer ${DOCS_TOKEN}"``) and are filled in
when a connection opens, so a value never reaches a snapshot, a log or a trace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from advisors_app.conf import app_settings
from advisors_app.models.mcp import HEADER_VALUE

__all__ = ["McpConfigurationError", "ServerConfig", "stdio_config"]

DEFAULT_CONNECT_TIMEOUT = 10.0
DEFAULT_CALL_TIMEOUT = 30.0


class McpConfigurationError(ValueError):
    """Raised when a server's configuration is unusable (bad settings entry, unset variable)."""


@dataclass(frozen=True)
class ServerConfig:
    """How to reach one MCP server; hashable, so connections are pooled by configuration.

    ``transport`` is ``"http"`` (``url``, ``headers`` as ``((name, "Bearer ${ENV}"), ...)``) or
    ``"stdio"`` (``command``, ``args``, ``env``, ``cwd``). Timeouts are seconds.
    """

    slug: str
    transport: str
    url: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    call_timeout: float = DEFAULT_CALL_TIMEOUT

    @classmethod
    def from_content(cls, slug: str, content: Mapping[str, Any]) -> ServerConfig:
        """The configuration a snapshot's ``mcp_server`` reference describes: an HTTP row's
        content, or for a stdio server the settings' entry as it is now."""
        if content.get("transport") == "stdio":
            config = stdio_config(slug)
            if config is None:
                raise McpConfigurationError(
                    f"MCP server {slug!r} is a stdio server and ADVISORS['MCP_SERVERS'] no "
                    "longer defines it"
                )
            return config
        return cls(
            slug,
            "http",
            url=str(content["url"]),
            headers=tuple(sorted((str(k), str(v)) for k, v in content["headers"].items())),
            connect_timeout=float(content["connect_timeout"]),
            call_timeout=float(content["call_timeout"]),
        )

    def resolved_headers(self) -> dict[str, str]:
        """The headers with each variable's value (only ever handed to the HTTP client).

        Raises :class:`McpConfigurationError` naming the variable (never a value) when one is
        not set."""
        resolved = {}
        for name, template in self.headers:
            match = HEADER_VALUE.match(template)
            if match is None:
                raise McpConfigurationError(f"MCP server {self.slug!r}: bad header {name!r}")
            scheme, variable = match.groups()
            value = os.environ.get(variable)
            if not value:
                raise McpConfigurationError(
                    f"MCP server {self.slug!r}: environment variable {variable} (header "
                    f"{name}) is not set"
                )
            resolved[name] = f"{scheme} {value}" if scheme else value
        return resolved

    def __repr__(self) -> str:
        # Never the environment of a stdio server (settings may put secrets there).
        where = self.url if self.transport == "http" else self.command
        return f"ServerConfig({self.slug!r}, {self.transport!r}, {where!r})"


def _timeout(entry: Mapping[str, Any], key: str, default: float, slug: str) -> float:
    value = entry.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise McpConfigurationError(
            f"ADVISORS['MCP_SERVERS'][{slug!r}][{key!r}] must be a positive number of seconds"
        )
    return float(value)


def stdio_config(slug: str) -> ServerConfig | None:
    """The stdio server ``slug`` of ``ADVISORS["MCP_SERVERS"]`` (``None``: not defined there).

    Raises :class:`McpConfigurationError` naming the entry and the field for a bad entry.
    """
    entry = app_settings.MCP_SERVERS.get(slug)
    if entry is None:
        return None
    where = f"ADVISORS['MCP_SERVERS'][{slug!r}]"
    if not isinstance(entry, Mapping):
        raise McpConfigurationError(f"{where} must be a dict with a 'command'")
    command = entry.get("command")
    args = entry.get("args", [])
    env = entry.get("env", {})
    cwd = entry.get("cwd")
    if not isinstance(command, str) or not command:
        raise McpConfigurationError(f"{where}['command'] must be a non-empty string")
    if not isinstance(args, list | tuple) or not all(isinstance(a, str) for a in args):
        raise McpConfigurationError(f"{where}['args'] must be a list of strings")
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise McpConfigurationError(f"{where}['env'] must map names to strings")
    if cwd is not None and not isinstance(cwd, str):
        raise McpConfigurationError(f"{where}['cwd'] must be a string")
    return ServerConfig(
        slug,
        "stdio",
        command=command,
        args=tuple(args),
        env=tuple(sorted(env.items())),
        cwd=cwd,
        connect_timeout=_timeout(entry, "connect_timeout", DEFAULT_CONNECT_TIMEOUT, slug),
        call_timeout=_timeout(entry, "call_timeout", DEFAULT_CALL_TIMEOUT, slug),
    )
