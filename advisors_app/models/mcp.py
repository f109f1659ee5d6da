"""MCP servers chains may take tools from (Model Context Protocol, Spring AI 2.1 MCP client).

A row is a **streamable-HTTP** server: its URL, the headers to send — values written as
``"${ENV_NAME}"`` or ``"Bearer ${ENV_NAME}"``, so the row names environment variables and never
holds a secret —, a connect and a per-call timeout, and whether chains may use it. **stdio**
servers (a command line) are configured only in settings (``ADVISORS["MCP_SERVERS"]``): a
command editable in the admin would let an admin account run programs on the server. Rows and
settings share one slug namespace; a row whose slug a settings entry takes is refused.
"""

from __future__ import annotations

import os
import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

__all__ = ["HEADER_VALUE", "McpServer", "header_env_names", "url_problems"]

#: A header value: an optional scheme word, then one environment variable reference.
HEADER_VALUE = re.compile(r"^(?:([A-Za-z][A-Za-z0-9-]*) )?\$\{([A-Za-z_][A-Za-z0-9_]*)\}$")
_HEADER_NAME = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


def header_env_names(headers: Any) -> dict[str, str]:
    """``{header: env var name}`` of ``headers`` (``{name: "Bearer ${ENV}"}``); ``ValueError``
    naming the header for a name or value of another shape."""
    if not isinstance(headers, dict):
        raise ValueError('headers must be a JSON object: {"Header-Name": "Bearer ${ENV_NAME}"}')
    names = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not _HEADER_NAME.match(name):
            raise ValueError(f"header name {name!r} is not a valid HTTP header name")
        match = HEADER_VALUE.match(value) if isinstance(value, str) else None
        if match is None:
            raise ValueError(
                f'header {name!r}: write the value as "${{ENV_NAME}}" or "Bearer ${{ENV_NAME}}" '
                "(the name of an environment variable, never the secret itself)"
            )
        names[name] = match.group(2)
    return names


#: Query parameter names that look like they carry a secret (``?access_token=``, ``?sig=``).
_SECRET_PARAM = re.compile(r"token|key|secret|passw|pwd|auth|sig|credential|session|jwt", re.I)


def url_problems(url: str) -> list[str]:
    """What makes ``url`` unfit for a row: not http(s), credentials in it (``user:pass@``) or a
    query parameter named like a secret. A row's URL is stored, shown in the admin and put in
    chain snapshots, so secrets go in headers by environment variable instead."""
    try:
        parts = urlsplit(url or "")
        userinfo = parts.username is not None or parts.password is not None
    except ValueError:
        return ["Enter a valid URL."]
    problems = []
    if parts.scheme not in ("http", "https"):
        problems.append("Enter an http:// or https:// URL.")
    if userinfo:
        problems.append(
            "Remove the credentials (user:password@) from the URL: it is stored, shown and put "
            'in snapshots. Send them as a header by variable: {"Authorization": '
            '"Basic ${MCP_CREDENTIALS}"}.'
        )
    secret = sorted(
        {
            name
            for name, _ in parse_qsl(parts.query, keep_blank_values=True)
            if _SECRET_PARAM.search(name)
        }
    )
    if secret:
        problems.append(
            f"Remove the query parameter(s) {', '.join(secret)} from the URL: a secret in it "
            "would be stored, shown and put in snapshots. Send it as a header by variable: "
            '{"Authorization": "Bearer ${MCP_TOKEN}"}.'
        )
    return problems


class McpServer(models.Model):
    """A streamable-HTTP MCP server (see the module docstring)."""

    slug = models.SlugField(max_length=100, unique=True, help_text="Key chains refer to.")
    name = models.CharField(max_length=200, blank=True)
    url = models.URLField(
        max_length=500, help_text="The server's streamable-HTTP endpoint, e.g. https://host/mcp."
    )
    headers = models.JSONField(
        default=dict,
        blank=True,
        help_text='Headers sent on every request, by environment variable: {"Authorization": '
        '"Bearer ${DOCS_TOKEN}"}. The value is read from the environment when connecting; '
        "it is never stored or shown.",
    )
    connect_timeout = models.FloatField(
        default=10.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(600.0)],
        help_text="Seconds to connect and list tools.",
    )
    call_timeout = models.FloatField(
        default=30.0,
        validators=[MinValueValidator(0.1), MaxValueValidator(3600.0)],
        help_text="Seconds one tool call may take; a slower call is a tool error the model sees.",
    )
    enabled = models.BooleanField(
        default=True, help_text="Chains may use it (a disabled server fails the chain's lint)."
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name or self.slug

    def clean(self) -> None:
        errors: dict[str, list[str]] = {}
        try:
            header_env_names(self.headers)
        except ValueError as exc:
            errors["headers"] = [str(exc)]
        url = url_problems(self.url)
        if url:
            errors["url"] = url
        from advisors_app.conf import app_settings

        if self.slug and self.slug in app_settings.MCP_SERVERS:
            errors.setdefault("slug", []).append(
                f"ADVISORS['MCP_SERVERS'] already defines a stdio server {self.slug!r}; "
                "choose another slug."
            )
        if errors:
            raise ValidationError(errors)

    @property
    def env_status(self) -> str:
        """Which header variables are set in this process (names only, never values)."""
        try:
            names = header_env_names(self.headers)
        except ValueError:
            return "invalid headers"
        if not names:
            return "no headers"
        return ", ".join(
            f"{env} {'set' if os.environ.get(env) else 'missing'}" for env in names.values()
        )

    def to_config(self) -> dict[str, Any]:
        """What a chain snapshot keeps of the row (no secret: header values name variables)."""
        return {
            "transport": "http",
            "url": self.url,
            "headers": dict(self.headers or {}),
            "connect_timeout": self.connect_timeout,
            "call_timeout": self.call_timeout,
            "enabled": self.enabled,
        }
