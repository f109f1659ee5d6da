"""The site's Content-Security-Policy (issue 36): on every HTML page, scripts from this origin's
files only, built on the event loop; the templates carry nothing such a policy would block.
tests/browser/test_csp.py runs the chat page and the admin under it in Chromium."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.test import AsyncClient, Client

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_DIRS = (ROOT / "advisors_app" / "templates", ROOT / "templates")

#: An opening <script> tag, and an event-handler attribute (onclick=, onerror=, ...).
SCRIPT_TAG = re.compile(r"<script\b([^>]*)>", re.IGNORECASE)
HANDLER = re.compile(r"<[a-z][^>]*\son[a-z]+\s*=", re.IGNORECASE)


def directives(header: str) -> dict[str, list[str]]:
    parts = (part.split() for part in header.split(";") if part.strip())
    return {name: values for name, *values in parts}


def test_the_policy_runs_scripts_from_files_of_this_origin_only(settings: Any) -> None:
    from advisorsite.middleware import CSPMiddleware

    assert "advisorsite.middleware.CSPMiddleware" in settings.MIDDLEWARE
    assert CSPMiddleware.__mro__[1].__name__ == "_OnTheEventLoop"


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/", "/accounts/login/", "/admin/login/", "/api/docs/"])
def test_every_page_has_the_policy(client: Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    policy = directives(response["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"] and policy["connect-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"] and policy["form-action"] == ["'self'"]


@pytest.mark.django_db
def test_the_chat_page_and_the_admin_have_it_signed_in(
    client: Client, django_user_model: Any
) -> None:
    client.force_login(django_user_model.objects.create_superuser("root", password="pw"))
    for path in ("/chat/", "/admin/", "/admin/advisors_app/advisorchain/"):
        response = client.get(path)
        assert response.status_code == 200, path
        assert directives(response["Content-Security-Policy"])["script-src"] == ["'self'"]


@pytest.mark.django_db(transaction=True)
async def test_the_header_costs_no_thread_hop() -> None:
    hops: list[str] = []
    original = SyncToAsync.__call__

    async def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    SyncToAsync.__call__ = counting  # type: ignore[method-assign]
    try:
        page = await AsyncClient().get("/admin/login/")
    finally:
        SyncToAsync.__call__ = original  # type: ignore[method-assign]
    assert "script-src 'self'" in page["Content-Security-Policy"]
    assert not [hop for hop in hops if hop.startswith("CSPMiddleware")], hops


def test_no_template_has_an_inline_script_or_event_handler() -> None:
    found = []
    for folder in TEMPLATE_DIRS:
        for path in folder.rglob("*.html"):
            text = path.read_text(encoding="utf-8")
            for attributes in SCRIPT_TAG.findall(text):
                if "src=" not in attributes and "application/json" not in attributes:
                    found.append(f"{path.relative_to(ROOT)}: inline <script{attributes}>")
            found += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in HANDLER.finditer(text)]
    assert found == []
