"""A live ASGI server for tests and benchmarks: daphne in a subprocess, on a free port.

Tests hand it the test database (``tests.helpers.database_url_for_subprocess``) and, for the
multi-process tests, a ``REDIS_URL``; rows the test writes with ``transactional_db`` are what
the server reads. The server's log goes to a file, so a test can assert on it (e.g. that no
application instance "took too long to shut down").
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any

from tests.helpers import subprocess_env

__all__ = ["ROOT", "LiveServer"]

ROOT = Path(__file__).resolve().parent.parent
_DAPHNE = (sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p")
_LISTENING = re.compile(r"Listening on TCP address [\d.]+:(\d+)")


class LiveServer:
    """``daphne <application>`` on 127.0.0.1 and a port the OS picks.

    ``daphne_args`` are extra command-line options (e.g. ``("--access-log", "/dev/null")``);
    ``env`` overrides go on top of this process's environment (minus what would make the
    child inherit pytest's setup); ``DJANGO_SETTINGS_MODULE`` defaults to ``tests.settings``.
    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    """

    def __init__(
        self,
        log_path: Path,
        *,
        application: str = "advisorsite.asgi:application",
        daphne_args: tuple[str, ...] = (),
        **env: str,
    ) -> None:
        self.log_path = log_path
        self.application = application
        self.daphne_args = daphne_args
        log_path.unlink(missing_ok=True)  # one run's log; restarts append to it
        self.env = subprocess_env(**{"DJANGO_SETTINGS_MODULE": "tests.settings", **env})
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0
        self._log: IO[bytes] | None = None
        self._offset = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> LiveServer:
        """Start on a free port, or on the port of the previous start (a restart)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("ab")
        self._offset = len(self.log())
        self.process = subprocess.Popen(
            [*_DAPHNE, str(self.port), *self.daphne_args, self.application],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = _LISTENING.search(self.log()[self._offset :])
            if found:
                self.port = int(found.group(1))
                return self
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"daphne did not start; its log:\n{self.log()}")

    def restart(self) -> None:
        self.stop()
        self.start()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def cpu_seconds(self) -> float:
        """User + system CPU time the server process has used so far (Linux ``/proc``)."""
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def stop(self) -> None:
        """Stop the server gracefully (SIGINT, as Ctrl-C), killing it after 15 seconds."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()
