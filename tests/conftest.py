"""Suite-wide pytest configuration."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from tests.pytest_ci import SkipsFail, ci_enabled

pytest_plugins = ["pytester", "tests.demo_fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    if ci_enabled(dict(os.environ)):
        config.pluginmanager.register(SkipsFail(), "advisors-ci-skips-fail")


@pytest.fixture(autouse=True)
def _close_async_orm_connections(request: pytest.FixtureRequest) -> Iterator[None]:
    """Close the database connection that async ORM calls opened in asgiref's worker thread.

    Outside a request, ``sync_to_async`` (and Django's async ORM) runs in one long-lived
    thread whose connection nothing closes; it would keep the test database busy, so it could
    not be flushed or dropped.
    """
    yield
    if request.node.get_closest_marker("django_db") is None and not (
        {"db", "transactional_db", "live_server"} & set(request.fixturenames)
    ):
        return
    if "django" not in sys.modules:
        return
    from asgiref.sync import SyncToAsync
    from django.db import connections

    SyncToAsync.single_thread_executor.submit(connections.close_all).result()


@pytest.fixture
def fresh_chain_cache() -> Iterator[None]:
    """Built chains cleared before and after the test: they are cached per process by their
    snapshot, and a test's scripted model must not answer another test's turns."""
    from advisors_app.definition.runtime import clear_cache

    clear_cache()
    yield
    clear_cache()
