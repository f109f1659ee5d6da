"""Browser tests: Debian's Chromium driven by Playwright against a live daphne server.

The browser is never downloaded: Playwright launches ``/usr/bin/chromium`` (``scripts/test.sh``
installs the Debian package). The server is a daphne subprocess on the test database, serving
static files (``tests/live_asgi.py``); data comes from each test (``transactional_db``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.screenshots import ARTIFACTS, save
from tests.helpers import database_url_for_subprocess
from tests.live_server import LiveServer

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module", autouse=True)
def _orm_beside_playwright() -> Iterator[None]:
    """Let tests use the ORM while Playwright's sync API keeps an event loop in this thread.

    The loop only drives the browser connection; the ORM calls of these tests (and the
    database flush after each) are ordinary blocking calls between browser steps: Django's
    documented switch for such cases.
    """
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        yield


@pytest.fixture(scope="module")
def chat_server(django_db_setup: Any) -> Iterator[LiveServer]:
    server = LiveServer(
        ARTIFACTS / "server.log",
        application="tests.live_asgi:application",
        DATABASE_URL=database_url_for_subprocess(),
    )
    with server:
        yield server
    assert "took too long to shut down" not in server.log()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        pytest.skip("no /usr/bin/chromium (Debian: apt-get install chromium)")
    from playwright.sync_api import expect, sync_playwright

    # expect() waits 5 s by default, whatever the context's timeout: too short for a page on a
    # loaded two-core machine (CI runs there), so assertions wait as long as actions do.
    expect.set_options(timeout=20_000)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture
def new_page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    """``new_page(**context_options)``: a page in a fresh context (own cookies)."""
    contexts = []

    def make(**options: Any) -> Any:
        context = browser.new_context(**{"viewport": {"width": 1280, "height": 800}, **options})
        context.set_default_timeout(20_000)
        contexts.append(context)
        return context.new_page()

    yield make
    for index, context in enumerate(contexts):
        for page in context.pages:
            save(page, f"{request.node.name}-{index}")
        context.close()
