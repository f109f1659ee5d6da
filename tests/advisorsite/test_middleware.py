"""The example site's middleware run on the event loop and still do Django's work."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import SyncToAsync
from django.test import AsyncClient

pytestmark = pytest.mark.django_db(transaction=True)


async def test_headers_csrf_and_fewer_thread_hops() -> None:
    hops: list[str] = []
    original = SyncToAsync.__call__

    async def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
        hops.append(getattr(self.func, "__qualname__", repr(self.func)))
        return await original(self, *args, **kwargs)

    SyncToAsync.__call__ = counting  # type: ignore[method-assign]
    try:
        page = await AsyncClient().get("/admin/login/")
        refused = await AsyncClient(enforce_csrf_checks=True).post(
            "/admin/login/", {"username": "a", "password": "b"}
        )
    finally:
        SyncToAsync.__call__ = original  # type: ignore[method-assign]
    assert page.status_code == 200
    assert page["X-Frame-Options"] == "DENY" and page["X-Content-Type-Options"] == "nosniff"
    assert refused.status_code == 403  # CSRF
    on_loop = ("SecurityMiddleware", "CommonMiddleware", "AuthenticationMiddleware")
    assert not [hop for hop in hops if hop.startswith(on_loop)], hops
    assert "SessionMiddleware.process_request" not in hops
