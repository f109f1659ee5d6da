"""Ingestion jobs whose worker died: found from what the database holds, queued again or failed.

A task worker killed outright (``SIGKILL``, the OOM killer, a lost machine) cannot mark the job it
ran, which then stayed ``running`` for ever, even after restarts (issue 36). Now the runner of a
job (:func:`advisors_app.ingestion.jobs.run_job`) holds a PostgreSQL session-level advisory lock
named after the job while it runs it (:func:`holding`), and PostgreSQL releases that lock when
the runner's database session ends, however its process ended. So a job is *stranded* when it is
``running`` and no session holds its lock — or ``queued`` while its task is ``RUNNING`` (the
worker died between claiming the task and claiming the job): facts the database holds, with no
heartbeat and no wall-clock guess.

:func:`recover_jobs` puts each stranded job back in the queue — its task row (``django_tasks_db``'s
``DBTaskResult``) goes back to ``READY``, so the job keeps its task id — or fails it once its task
has been claimed ``ADVISORS["INGESTION_MAX_ATTEMPTS"]`` times (the task's ``worker_ids`` list one
worker per claim), so a file that kills every worker stops being retried. A job with no such
task row (another tasks backend, or none: it ran in a request) is failed. It runs from
``manage.py ingestion_recover`` and when a ``manage.py db_worker`` starts (:func:`connect`).

Caveats: a pooler in transaction mode (PgBouncer) does not keep session locks — workers must
reach PostgreSQL directly or through session pooling; and the session of a killed worker lives
on while one of its statements waits for a lock, so its job counts as running until then.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.apps import apps
from django.db import DatabaseError, connection, transaction
from django.db.backends.signals import connection_created
from django.db.models import QuerySet
from django.utils import timezone

from advisors_app.conf import app_settings
from advisors_app.models import IngestionFile, IngestionJob

try:
    from django.tasks import TaskResultStatus  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import TaskResultStatus

__all__ = ["Recovery", "WorkerGone", "connect", "holding", "recover_jobs"]

logger = logging.getLogger("advisors_app.ingestion.pipeline")

Status = IngestionJob.Status

#: Name of the advisory lock a job's runner holds (with the job's id).
_LOCK = "advisors_app.ingestion.job"
_AT_START = "advisors_app.ingestion.recovery.at_start"


class WorkerGone(RuntimeError):
    """Recorded as the error of a task whose job is failed because its workers kept dying."""


@dataclass(frozen=True, slots=True)
class Recovery:
    """What :func:`recover_jobs` did to one stranded job: ``outcome`` ``"requeued"`` or
    ``"failed"``, after ``attempts`` runs (claims of its task) that a dead worker cut short."""

    job_id: str
    outcome: str
    attempts: int

    def __str__(self) -> str:
        return f"ingestion job {self.job_id}: {self.outcome} after {self.attempts} attempt(s)"


def _advisory(function: str, job_id: str) -> Any:
    """Call the advisory-lock ``function`` on job ``job_id``'s lock; what it returns."""
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {function}(hashtextextended(%s, 0))", [f"{_LOCK}:{job_id}"])
        return cursor.fetchone()[0]


@contextlib.contextmanager
def holding(job_id: str) -> Iterator[None]:
    """Hold job ``job_id``'s lock on this thread's database session while the block runs.

    Waits while another session holds it: another runner of the same job (which ends as
    ``skipped`` once this one is done) or a recovery looking at the job.
    """
    _advisory("pg_advisory_lock", job_id)
    try:
        yield
    finally:
        _release(job_id)


def _release(job_id: str) -> None:
    # A session that failed may be unable to release it: it does when it ends.
    with contextlib.suppress(DatabaseError):
        _advisory("pg_advisory_unlock", job_id)


def _tasks() -> QuerySet[Any] | None:
    """``django_tasks_db``'s task rows, or ``None`` when the project does not install it."""
    if not apps.is_installed("django_tasks_db"):
        return None
    from django_tasks_db.models import DBTaskResult

    return DBTaskResult.objects.all()


def _task_of(job: IngestionJob) -> Any:
    """The job's task row (locked), or ``None`` when ``django_tasks_db`` keeps none."""
    tasks = _tasks()
    try:
        task_id = uuid.UUID(job.task_id)
    except ValueError:
        return None
    return None if tasks is None else tasks.select_for_update().filter(pk=task_id).first()


def _suspects() -> list[str]:
    """Jobs that may be stranded: running ones, and queued ones whose task is running."""
    running = IngestionJob.objects.filter(status=Status.RUNNING)
    suspects = [str(pk) for pk in running.values_list("pk", flat=True)]
    tasks = _tasks()
    if tasks is not None:
        claimed = tasks.filter(status=TaskResultStatus.RUNNING).values_list("pk", flat=True)
        queued = IngestionJob.objects.filter(
            status=Status.QUEUED, task_id__in=[str(pk) for pk in claimed]
        )
        suspects += [str(pk) for pk in queued.values_list("pk", flat=True)]
    return suspects


def recover_jobs(max_attempts: int | None = None) -> list[Recovery]:
    """Queue again, or fail, every stranded job (see the module docstring); what was done.

    ``max_attempts`` (default ``ADVISORS["INGESTION_MAX_ATTEMPTS"]``): a job whose task was
    claimed that many times is failed. Safe to run at any time and in several processes at once:
    a job whose runner is alive is left alone, and each stranded job is recovered once.
    """
    most = max(1, max_attempts or app_settings.INGESTION_MAX_ATTEMPTS)
    recoveries = []
    for job_id in _suspects():
        recovery = _recover(job_id, most)
        if recovery is not None:
            logger.warning("Ingestion job %s: its worker is gone; %s", job_id, recovery.outcome)
            recoveries.append(recovery)
    return recoveries


def _recover(job_id: str, most: int) -> Recovery | None:
    locked = False
    try:
        with transaction.atomic():
            # Skip a row being written: its runner is at work, so not gone.
            job = (
                IngestionJob.objects.select_for_update(skip_locked=True)
                .filter(pk=job_id, status__in=(Status.QUEUED, Status.RUNNING))
                .first()
            )
            if job is None:
                return None  # finished meanwhile
            locked = _advisory("pg_try_advisory_lock", job_id)
            if not locked:
                return None  # its runner is alive
            task = _task_of(job)
            if job.status == Status.QUEUED and (
                task is None or task.status != TaskResultStatus.RUNNING
            ):
                return None  # its task was put back meanwhile
            attempts = len(task.worker_ids) if task is not None else 1
            if task is None or attempts >= most:
                _fail(job, task, attempts, most)
                return Recovery(job_id, "failed", attempts)
            IngestionJob.objects.filter(pk=job.pk).update(
                status=Status.QUEUED, started_at=None, done=0, total=0
            )
            type(task).objects.filter(pk=task.pk).update(
                status=TaskResultStatus.READY, finished_at=None
            )
            return Recovery(job_id, "requeued", attempts)
    finally:
        if locked:
            _release(job_id)


def _fail(job: IngestionJob, task: Any, attempts: int, most: int) -> None:
    if task is None:
        message = (
            "the process running this job stopped, and no task of it is left to run it again; "
            "upload the files again"
        )
    else:
        message = (
            f"the worker running this job stopped {attempts} times "
            f"(ADVISORS['INGESTION_MAX_ATTEMPTS'] = {most})"
        )
    IngestionJob.objects.filter(pk=job.pk).update(
        status=Status.FAILED,
        finished_at=timezone.now(),
        errors=[{"source": None, "message": message}],
    )
    IngestionFile.objects.filter(job=job).delete()
    if task is not None:
        task.set_failed(WorkerGone(message))


def connect() -> None:
    """In a task worker (``manage.py db_worker``), recover stranded jobs when it first connects
    to the database, before it takes a task (a worker restarted after a crash picks its job
    up again). Called from the app's ``ready()``; other processes are left alone."""
    if sys.argv[1:2] == ["db_worker"]:
        connection_created.connect(_recover_at_start, dispatch_uid=_AT_START)


def _recover_at_start(**_: Any) -> None:
    connection_created.disconnect(dispatch_uid=_AT_START)
    # On a connection of its own: the worker may be opening this one on entering a transaction.
    recovery = threading.Thread(target=_recover_logged, name="ingestion-recover")
    recovery.start()
    recovery.join()


def _recover_logged() -> None:
    try:
        recover_jobs()
    except Exception:  # the worker runs on (a database not migrated yet, say)
        logger.exception("Could not recover the ingestion jobs of dead workers")
    finally:
        connection.close()
