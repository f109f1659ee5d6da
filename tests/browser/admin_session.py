"""Helpers of the admin's browser tests: log in through the admin's form, and collect what went
wrong in the page (console errors, uncaught errors, requests to anywhere but the server)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from tests.live_server import LiveServer

__all__ = ["PageProblems", "admin_log_in", "watch"]


def admin_log_in(page: Any, server: LiveServer, path: str, username: str = "admin") -> None:
    """Log in on the admin's login page (password ``pw``), which then opens ``path``."""
    page.goto(f"{server.url}/admin/login/?next={quote(path)}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("pw")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(server.url + path)


@dataclass
class PageProblems:
    """Console errors and uncaught errors (``errors``), and requests off the server
    (``elsewhere``): both must stay empty for a page that works offline."""

    errors: list[str] = field(default_factory=list)
    elsewhere: list[str] = field(default_factory=list)


def watch(page: Any, server: LiveServer) -> PageProblems:
    """Start collecting ``page``'s problems."""
    problems = PageProblems()

    def console(message: Any) -> None:
        # Chromium's own /favicon.ico request is not the page's.
        if message.type == "error" and not message.location["url"].endswith("/favicon.ico"):
            problems.errors.append(f"{message.text} ({message.location['url']})")

    page.on("console", console)
    page.on("pageerror", lambda error: problems.errors.append(str(error)))
    page.on(
        "request",
        lambda r: None if r.url.startswith(server.url) else problems.elsewhere.append(r.url),
    )
    return problems
