"""``read_or_create_secret``: created once with mode 600, then reused."""

from __future__ import annotations

import stat
from pathlib import Path

from advisors_app.security.secret_files import read_or_create_secret


def test_secret_is_created_once_private_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "var" / "secret"
    assert read_or_create_secret(path, lambda: "first") == "first"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_or_create_secret(path, lambda: "second") == "first"
