"""Jobs whose worker died (issue 36): found from the database's facts, queued again or failed.

A worker killed outright leaves its job ``running`` and its task ``RUNNING``, claimed by a worker
id; no session holds the job's lock any more. These tests build exactly that state (the real
kill is ``tests/test_ingestion_worker.py``'s) and a live runner as a second database session
holding the lock (:func:`advisors_app.ingestion.recovery.holding`, on a thread).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from advisors_app.ingestion.jobs import Upload, submit_job
from advisors_app.ingestion.recovery import Recovery, holding, recover_jobs
from advisors_app.models import Collection, IngestionFile, IngestionJob
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def job() -> IngestionJob:
    collection = Collection.objects.create(slug="kb", name="KB")
    return submit_job(collection, [Upload("a.md", b"# Refunds\n\nThey take five days.")])


def task_of(job: IngestionJob) -> DBTaskResult:
    return DBTaskResult.objects.get(pk=job.task_id)


def killed_while_running(job: IngestionJob, *workers: str) -> None:
    """What a worker killed outright in the middle of the job leaves (after ``workers`` claims)."""
    task = task_of(job)
    for worker in workers:
        task.claim(worker)
    IngestionJob.objects.filter(pk=job.pk).update(status="running", done=3, total=7)


@contextmanager
def live_runner(job: IngestionJob) -> Iterator[None]:
    """Another session holds the job's lock, as a worker running it does."""
    held, done = threading.Event(), threading.Event()

    def run() -> None:
        try:
            with holding(str(job.pk)):
                held.set()
                done.wait()
        finally:
            connection.close()

    runner = threading.Thread(target=run)
    runner.start()
    assert held.wait(30)
    try:
        yield
    finally:
        done.set()
        runner.join()


def test_a_job_whose_worker_died_is_queued_again_and_then_runs(job: IngestionJob) -> None:
    killed_while_running(job, "worker-1")

    assert recover_jobs() == [Recovery(str(job.pk), "requeued", 1)]
    job.refresh_from_db()
    assert (job.status, job.started_at, job.done, job.total) == ("queued", None, 0, 0)
    task = task_of(job)
    assert task.status == "READY" and task.worker_ids == ["worker-1"]
    assert recover_jobs() == []  # nothing is stranded any more

    assert run_queued_tasks() == 1
    job.refresh_from_db()
    assert job.status == "done", job.errors
    assert task_of(job).worker_ids[0] == "worker-1" and len(task_of(job).worker_ids) == 2


def test_a_job_whose_runner_is_alive_is_left_alone(job: IngestionJob) -> None:
    killed_while_running(job, "worker-1")
    with live_runner(job):
        assert recover_jobs() == []
    job.refresh_from_db()
    assert job.status == "running" and task_of(job).status == "RUNNING"
    assert recover_jobs() == [Recovery(str(job.pk), "requeued", 1)]  # its runner is gone now


def test_a_job_whose_workers_keep_dying_fails_after_the_attempts(job: IngestionJob) -> None:
    killed_while_running(job, "worker-1", "worker-2")
    with override_settings(ADVISORS={"INGESTION_MAX_ATTEMPTS": 2}):
        assert recover_jobs() == [Recovery(str(job.pk), "failed", 2)]
    job.refresh_from_db()
    assert job.status == "failed" and job.finished_at is not None
    assert job.errors == [
        {
            "source": None,
            "message": "the worker running this job stopped 2 times "
            "(ADVISORS['INGESTION_MAX_ATTEMPTS'] = 2)",
        }
    ]
    assert not IngestionFile.objects.filter(job=job).exists()
    task = task_of(job)
    assert task.status == "FAILED"
    assert task.exception_class_path == "advisors_app.ingestion.recovery.WorkerGone"
    assert run_queued_tasks() == 0 and recover_jobs() == []


def test_a_worker_that_died_between_claiming_the_task_and_the_job(job: IngestionJob) -> None:
    """The task is ``RUNNING``, the job still ``queued``: the task goes back to the queue."""
    task_of(job).claim("worker-1")
    assert recover_jobs() == [Recovery(str(job.pk), "requeued", 1)]
    assert task_of(job).status == "READY"
    assert run_queued_tasks() == 1
    job.refresh_from_db()
    assert job.status == "done"


def test_queued_and_finished_jobs_are_not_stranded(job: IngestionJob) -> None:
    assert recover_jobs() == []
    assert task_of(job).status == "READY"
    run_queued_tasks()
    assert recover_jobs() == []
    job.refresh_from_db()
    assert job.status == "done"


def test_a_running_job_without_a_task_row_is_failed(job: IngestionJob) -> None:
    """It ran in a process of another tasks backend (or in a request): nothing can rerun it."""
    IngestionJob.objects.filter(pk=job.pk).update(status="running", task_id="")
    [recovery] = recover_jobs()
    assert (recovery.outcome, recovery.attempts) == ("failed", 1)
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.errors[0]["message"].startswith("the process running this job stopped")


def test_the_command_reports_each_job_it_recovers(job: IngestionJob) -> None:
    out = StringIO()
    call_command("ingestion_recover", stdout=out)
    assert out.getvalue() == "No ingestion job is stranded.\n"
    killed_while_running(job, "worker-1")
    call_command("ingestion_recover", "--max-attempts", "1", stdout=out)
    assert out.getvalue().endswith(f"ingestion job {job.pk}: failed after 1 attempt(s)\n")
