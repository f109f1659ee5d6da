"""Screenshots taken by the browser tests: artifacts always, the README's images on request.

Every test's last view is saved under ``test-artifacts/browser/`` (git-ignored). The images
the README and the docs show, ``docs/screenshots/chat.png``, ``chain-editor.png``,
``chain-picture.png`` and ``dashboard.png``, are taken by the tests too and copied into
``docs/screenshots/`` when ``ADVISORS_UPDATE_SCREENSHOTS=1``:

    ADVISORS_UPDATE_SCREENSHOTS=1 .venv/bin/pytest tests/browser
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

from tests.live_server import ROOT

__all__ = ["ARTIFACTS", "README_IMAGES", "save"]

ARTIFACTS = ROOT / "test-artifacts" / "browser"
README_IMAGES = ROOT / "docs" / "screenshots"
UPDATE = "ADVISORS_UPDATE_SCREENSHOTS"


def save(page: Any, name: str, *, readme: bool = False, full_page: bool = False) -> Path:
    """Save a screenshot of ``page`` as ``name``.png (and as a README image if asked);
    ``page`` may be a Playwright locator: then the picture is of that element only."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '_', name)}.png"
    page.screenshot(path=str(path), **({"full_page": True} if full_page else {}))
    if readme and os.environ.get(UPDATE):
        README_IMAGES.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, README_IMAGES / path.name)
    return path
