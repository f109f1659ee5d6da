"""Keys and tokens in text: what the ``secrets`` guard check finds and redacts.

Shapes that are credentials wherever they appear (not the configured values the Django layer's
:mod:`advisors_app.security.redaction` also knows): provider API keys (OpenAI ``sk-``,
Anthropic ``sk-ant-``, Google ``AIza``), cloud keys (AWS access key ids), source-host tokens
(GitHub ``ghp_``/``github_pat_``, GitLab ``glpat-``), Slack ``xox?-`` tokens, Stripe live
keys, JSON Web Tokens, PEM private keys, ``Bearer`` credentials and ``password=`` style
assignments. Each pattern is anchored on its prefix, so ordinary words and hashes are left
alone.
"""

from __future__ import annotations

import re

__all__ = ["SECRET_MARKER", "SECRET_PATTERNS", "find_secrets", "redact_secrets"]

#: What a secret is replaced with.
SECRET_MARKER = "[SECRET]"

#: Kind → pattern.
SECRET_PATTERNS: dict[str, re.Pattern[str]] = {
    "private_key": re.compile(
        r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----[\s\S]*?"
        r"(?:-----END (?:[A-Z]+ )?PRIVATE KEY-----|$)"
    ),
    "openai_key": re.compile(r"(?<![A-Za-z0-9])sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),
    "google_key": re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}"),
    "aws_access_key": re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Z0-9])"),
    "github_token": re.compile(r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_\w{40,})"),
    "gitlab_token": re.compile(r"(?<![A-Za-z0-9])glpat-[A-Za-z0-9_-]{20}"),
    "slack_token": re.compile(r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}"),
    "stripe_key": re.compile(r"(?<![A-Za-z0-9])(?:sk|rk)_live_[A-Za-z0-9]{16,}"),
    "jwt": re.compile(
        r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    ),
    "bearer": re.compile(r"(?i:\bbearer)\s+[A-Za-z0-9._~+/-]{20,}=*"),
    "password_assignment": re.compile(
        r"(?i:\b(?:password|passwd|pwd|secret|api_key|apikey|access_token)\b)\s*[:=]\s*"
        r"['\"]?[^\s'\"]{8,}"
    ),
}


def find_secrets(text: str) -> list[tuple[str, int, int]]:
    """``(kind, start, end)`` of every secret in ``text``, in order, without overlaps."""
    found: list[tuple[str, int, int]] = []
    for kind, pattern in SECRET_PATTERNS.items():
        for match in pattern.finditer(text):
            start, end = match.span()
            if all(end <= s or start >= e for _, s, e in found):
                found.append((kind, start, end))
    return sorted(found, key=lambda f: f[1])


def redact_secrets(text: str, spans: list[tuple[str, int, int]] | None = None) -> str:
    """``text`` with every secret replaced by :data:`SECRET_MARKER`."""
    parts: list[str] = []
    cursor = 0
    for _, start, end in spans if spans is not None else find_secrets(text):
        parts += [text[cursor:start], SECRET_MARKER]
        cursor = end
    parts.append(text[cursor:])
    return "".join(parts)
