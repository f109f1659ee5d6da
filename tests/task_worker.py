"""Task workers for the tests: ``manage.py db_worker`` in a subprocess, or its loop in-process.

:class:`DbWorker` is the real worker as deployments run it, against the test database (rows a
test writes must be committed for it to see them: ``django_db(transaction=True)``).
:func:`run_queued_tasks` runs the worker's own task runner (``django_tasks_db``'s ``Worker``) in
this process until the queue is empty, inside the test's transaction, for tests about what a job
does rather than where it runs.
"""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import IO, Any

from django.db import transaction
from django_tasks_db.management.commands.db_worker import Worker
from django_tasks_db.models import DBTaskResult

from tests.helpers import database_url_for_subprocess, subprocess_env
from tests.live_server import ROOT

__all__ = ["DbWorker", "run_queued_tasks", "wait_for_job"]


def run_queued_tasks() -> int:
    """Run every ready task in this process, as the worker's ``--batch`` loop does (claim,
    then ``Worker.run_task``), minus its ``close_old_connections``, which would close the
    test's connection inside its transaction; how many ran."""
    worker = Worker(
        queue_names=["default"],
        interval=0,
        batch=True,
        backend_name="default",
        startup_delay=False,
        max_tasks=None,
        worker_id=f"test-{uuid.uuid4().hex[:8]}",
        excluded_queue_names=[],
    )
    ran = 0
    while True:
        with transaction.atomic():
            task = DBTaskResult.objects.ready().get_locked()
            if task is None:
                return ran
            task.claim(worker.worker_id)
        worker.run_task(task)
        ran += 1


class DbWorker:
    """``manage.py db_worker`` on the test database, in a subprocess; its output in ``log_path``."""

    def __init__(self, log_path: Path, **env: str) -> None:
        self.log_path = log_path
        self.env = subprocess_env(
            DJANGO_SETTINGS_MODULE="tests.settings",
            DATABASE_URL=database_url_for_subprocess(),
            **env,
        )
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def __enter__(self) -> DbWorker:
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                *(sys.executable, "manage.py", "db_worker", "--no-reload"),
                *("--no-startup-delay", "--interval", "0.1", "--verbosity", "2"),
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 60.0) -> DbWorker:
        """Return once the worker polls the queue (it logs "Starting worker")."""
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while "Starting worker" not in self.log():
            assert self.process.poll() is None, self.log()
            assert time.monotonic() < deadline, f"the worker did not start:\n{self.log()}"
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: Any) -> None:
        assert self.process is not None and self._log is not None
        self.process.terminate()  # the worker finishes its task, then exits
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


def wait_for_job(job_id: Any, timeout: float = 60.0, worker: DbWorker | None = None) -> Any:
    """The job once it is ``done`` or ``failed`` (polled); ``AssertionError`` after ``timeout``."""
    from advisors_app.models import IngestionJob

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = IngestionJob.objects.get(pk=job_id)
        if job.finished:
            return job
        if worker is not None and worker.process is not None:
            assert worker.process.poll() is None, worker.log()
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {job.status} after {timeout} s")
