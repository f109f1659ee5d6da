"""Ingestion in real task workers (``manage.py db_worker`` subprocesses on the test database),
as issue 18's tester tried it: the 200-page shared-content-stream PDF and a PDF bomb are
contained in a worker (the job fails, naming the limit) while the web side answers at once,
an ordinary PDF is ingested with the real embedding model, and two workers share the queue
(each task runs once). Issue 36's: an HTML bomb is contained in the reading child with the
worker's peak memory measured, and a worker killed mid-job (``SIGKILL``) leaves a job that
``manage.py ingestion_recover`` and a restarted worker take up again."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.db import connection
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from advisors_app.ingestion.jobs import Upload, submit_job
from advisors_app.ingestion.recovery import recover_jobs
from advisors_app.models import Collection, Document, IngestionJob
from tests.api.conftest import client_for
from tests.hostile_pdfs import bomb_pdf, shared_stream_pdf, text_pdf
from tests.task_worker import DbWorker, wait_for_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

#: The CPU-heavy upload gets this budget, so the test shows the CPU limit working in a worker.
CPU_SECONDS = 4


def upload(client: Any, name: str, data: bytes) -> dict[str, Any]:
    response = client.post(
        "/api/documents/",
        {"collection": "kb", "file": [SimpleUploadedFile(name, data, "application/pdf")]},
        format="multipart",
    )
    assert response.status_code == 202, response.content
    return response.json()


def answered_mid_job(client: Any, url: str, worker: DbWorker) -> dict[str, Any]:
    """The web side's answer about the job at ``url`` once a worker has taken it up: an answer
    given while that worker reads the file (the CPU-bound one reads for seconds of CPU)."""
    hang_guard = time.monotonic() + 120  # only so a stuck queue fails instead of hanging
    while (job := client.get(url).json())["status"] == "queued":
        assert client.get("/api/collections/").status_code == 200
        assert time.monotonic() < hang_guard, worker.log()
        time.sleep(0.05)
    return job


def test_hostile_pdfs_are_contained_in_the_workers_while_the_web_side_stays_fast(
    tmp_path: Path, django_user_model: Any
) -> None:
    alice = django_user_model.objects.create_user("alice", password="pw")
    Collection.objects.create(slug="kb", name="KB")
    api = client_for(alice)
    heavy = shared_stream_pdf()  # ~1 s of CPU per page for each of its 200 pages
    with DbWorker(tmp_path / "a.log") as first, DbWorker(tmp_path / "b.log") as second:
        # Both poll before the first upload, so the second takes tasks while the first chews.
        first.wait_ready()
        second.wait_ready()
        with override_settings(
            ADVISORS={
                "UPLOAD_THROTTLE_RATE": "",
                "INGESTION_MAX_CHARS": 0,
                "INGESTION_MAX_DECOMPRESSED_BYTES": 0,
                "INGESTION_CPU_SECONDS": CPU_SECONDS,
            }
        ):
            cpu_bound = upload(api, "jack.pdf", heavy)
        jack = upload(api, "jack-defaults.pdf", heavy)  # the shipped limits
        bomb = upload(api, "bomb.pdf", bomb_pdf())
        good = upload(api, "guide.pdf", text_pdf("Bergen has a fish market.", "Oslo."))
        posted = [cpu_bound, jack, bomb, good]

        # While a worker chews on the CPU-bound file, the web side answers about it.
        mid_job = answered_mid_job(api, cpu_bound["url"], first)

        jobs = {
            name: wait_for_job(job["id"], timeout=120, worker=first)
            for name, job in [
                ("jack", cpu_bound),
                ("defaults", jack),
                ("bomb", bomb),
                ("good", good),
            ]
        }
        log = first.log() + second.log()

    # The request only stores the file (it read it before, for 77 s): none came back read.
    assert [job["status"] for job in posted] == ["queued"] * 4, posted
    assert mid_job["status"] == "running", mid_job

    assert jobs["jack"].status == "failed"
    assert jobs["jack"].errors == [
        {
            "source": None,
            "message": f"the job used more than {CPU_SECONDS} s of CPU time reading jack.pdf "
            "(ADVISORS['INGESTION_CPU_SECONDS'])",
        }
    ]
    # The budget's error, not a reading to the end: test_parsing shows the kernel's SIGXCPU.
    assert jobs["defaults"].status == "failed"
    assert jobs["defaults"].errors[0]["message"] == (
        "jack-defaults.pdf holds more than 1000000 characters of text by page 2 of 200 "
        "(ADVISORS['INGESTION_MAX_CHARS'])"
    )
    assert jobs["bomb"].status == "failed"
    [bombed] = jobs["bomb"].errors
    assert bombed["source"] == "bomb.pdf"
    assert bombed["message"].startswith(
        "bomb.pdf passes a PDF reading limit: Limit reached while decompressing."
    )
    assert jobs["good"].status == "done", jobs["good"].errors
    assert jobs["good"].documents == [
        {"source": "guide.pdf", "chunks": 2, "added": 2, "unchanged": 0, "removed": 0}
    ]
    assert Document.objects.filter(owner=alice).count() == 2  # the failed jobs stored nothing

    # Both workers took tasks from the one queue; each task ran exactly once.
    tasks = DBTaskResult.objects.all()
    assert len(tasks) == 4 and all(len(task.worker_ids) == 1 for task in tasks)
    assert all(task.status == "SUCCESSFUL" for task in tasks), log
    assert len({task.worker_ids[0] for task in tasks}) == 2, log


# -- issue 36: an HTML bomb, and workers killed mid-job -----------------------------------------

MB = 1024 * 1024
#: The reading child's memory in the HTML-bomb test (the default is 1 GiB).
CHILD_MEMORY = 256 * MB


def post_files(client: Any, *files: tuple[str, bytes, str]) -> dict[str, Any]:
    uploads = [SimpleUploadedFile(name, data, content_type) for name, data, content_type in files]
    response = client.post(
        "/api/documents/", {"collection": "kb", "file": uploads}, format="multipart"
    )
    assert response.status_code == 202, response.content
    return response.json()


def peak_memory(pid: int) -> int:
    """The peak resident memory of process ``pid`` so far (``VmHWM``), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


def test_an_html_bomb_is_read_in_a_bounded_child_and_the_worker_stays_small(
    tmp_path: Path, django_user_model: Any
) -> None:
    """10 MB of nested tags took the worker to 2.3 GB for 54 s (issue 36)."""
    alice = django_user_model.objects.create_user("alice", password="pw")
    Collection.objects.create(slug="kb", name="KB")
    api = client_for(alice)
    bomb = b"<div>" * (10 * MB // 5 - 1)
    with DbWorker(tmp_path / "worker.log") as worker:
        worker.wait_ready()
        assert worker.process is not None
        with override_settings(
            ADVISORS={"UPLOAD_THROTTLE_RATE": "", "INGESTION_MEMORY_BYTES": CHILD_MEMORY}
        ):
            bombed = post_files(
                api,
                ("bomb.html", bomb, "text/html"),
                ("notes.md", b"# Notes\n\nBergen has a fish market.", "text/markdown"),
            )
        bombed = wait_for_job(bombed["id"], timeout=120, worker=worker)
        peak = peak_memory(worker.process.pid)
        # The worker carries on with the next job.
        good = post_files(api, ("guide.md", b"# Guide\n\nOslo has a harbour.", "text/markdown"))
        good = wait_for_job(good["id"], timeout=120, worker=worker)

    assert bombed.status == "failed"
    assert bombed.errors == [
        {
            "source": "bomb.html",
            "message": f"bomb.html needs more than {CHILD_MEMORY} bytes of memory to read "
            "(ADVISORS['INGESTION_MEMORY_BYTES'])",
        }
    ]
    # The file's bytes and the interpreter; the tree BeautifulSoup built lived in the child.
    assert peak < 400 * MB, peak
    assert good.status == "done", good.errors
    assert Document.objects.filter(source="guide.md").exists()
    assert not Document.objects.filter(source="notes.md").exists()  # a job stores all or none


@contextmanager
def collection_locked(collection: Collection) -> Iterator[int]:
    """Hold ``collection``'s row lock in a session of its own (its backend's pid), so a worker
    storing into it waits there: mid-job, its chunks embedded, nothing stored."""
    holder = connection.copy()
    try:
        with holder.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute(
                f"SELECT pg_backend_pid() FROM {Collection._meta.db_table} WHERE id = %s "
                "FOR UPDATE",
                [collection.pk],
            )
            yield cursor.fetchone()[0]
            cursor.execute("ROLLBACK")
    finally:
        holder.close()


def blocked_by(holder: int, worker: DbWorker, timeout: float = 120.0) -> int:
    """The backend pid of the session that waits for ``holder``'s lock (``worker``'s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))", [holder]
            )
            row = cursor.fetchone()
        if row is not None:
            return int(row[0])
        assert worker.process is not None and worker.process.poll() is None, worker.log()
        time.sleep(0.1)
    raise AssertionError(f"no worker waited for the collection:\n{worker.log()}")


def kill(worker: DbWorker) -> None:
    assert worker.process is not None
    worker.process.send_signal(signal.SIGKILL)
    worker.process.wait()


def wait_until_ended(backend: int, timeout: float = 60.0) -> None:
    """Wait until database session ``backend`` (a killed worker's) has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [backend])
            if cursor.fetchone() is None:
                return
        time.sleep(0.1)
    raise AssertionError(f"the session {backend} of the killed worker is still there")


def killed_mid_job(job: IngestionJob, collection: Collection, log: Path) -> None:
    """Start a worker, let it run ``job`` up to storing, and kill it there (``SIGKILL``)."""
    with collection_locked(collection) as holder, DbWorker(log) as worker:
        backend = blocked_by(holder, worker)
        # The worker is alive and holds the job's lock: no recovery takes its job.
        assert recover_jobs() == []
        kill(worker)
    wait_until_ended(backend)  # its statement got the lock, then found the client gone
    job.refresh_from_db()
    assert job.status == "running"  # what a killed worker leaves: before issue 36, for ever


def test_a_job_whose_worker_is_killed_is_recovered_by_the_command_and_by_a_restarted_worker(
    tmp_path: Path,
) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    first = submit_job(collection, [Upload("a.md", b"# Refunds\n\nThey take five days.")])
    killed_mid_job(first, collection, tmp_path / "a.log")

    out = StringIO()
    call_command("ingestion_recover", stdout=out)
    assert out.getvalue() == f"ingestion job {first.pk}: requeued after 1 attempt(s)\n"
    first.refresh_from_db()
    assert first.status == "queued"
    assert DBTaskResult.objects.get(pk=first.task_id).status == "READY"

    with DbWorker(tmp_path / "b.log") as worker:
        first = wait_for_job(first.pk, timeout=120, worker=worker)
    assert first.status == "done", first.errors
    assert len(DBTaskResult.objects.get(pk=first.task_id).worker_ids) == 2

    # Killed again mid-job, then a worker starts: it takes the job up again by itself.
    second = submit_job(collection, [Upload("b.md", b"# Returns\n\nWithin thirty days.")])
    killed_mid_job(second, collection, tmp_path / "c.log")
    with DbWorker(tmp_path / "d.log") as worker:
        second = wait_for_job(second.pk, timeout=120, worker=worker)
    assert f"Ingestion job {second.pk}: its worker is gone; requeued" in worker.log()
    assert second.status == "done", second.errors
    assert len(DBTaskResult.objects.get(pk=second.task_id).worker_ids) == 2
    assert Document.objects.filter(source__in=["a.md", "b.md"]).count() == 2
