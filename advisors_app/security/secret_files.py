"""Small secrets kept in local files readable only by their owner (mode 600).

Used for values generated once and then reused: the example site's ``SECRET_KEY`` and the demo
admin password. Creation is atomic (``O_EXCL``), so two processes starting at once agree.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

__all__ = ["read_or_create_secret"]


def read_or_create_secret(path: Path, make: Callable[[], str]) -> str:
    """Return the secret stored in ``path``; if there is none, store ``make()`` there first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    value = make()
    with os.fdopen(fd, "w") as file:
        file.write(value + "\n")
    return value
