"""Ingestion in real task workers (``manage.py db_worker`` subprocesses on the test database),
as issue 18's tester tried it: the 200-page shared-content-stream PDF and a PDF bomb are
contained in a worker (the job fails, naming the limit) while the web side answers at once,
an ordinary PDF is ingested with the real embedding model, and two workers share the queue
(each task runs once)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from advisors_app.models import Collection, Document
from tests.api.conftest import client_for
from tests.hostile_pdfs import bomb_pdf, shared_stream_pdf, text_pdf
from tests.task_worker import DbWorker, wait_for_job

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(240)]

#: The CPU-heavy upload gets this budget, so the test shows the CPU limit working in a worker.
CPU_SECONDS = 4


def upload(client: Any, name: str, data: bytes) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    response = client.post(
        "/api/documents/",
        {"collection": "kb", "file": [SimpleUploadedFile(name, data, "application/pdf")]},
        format="multipart",
    )
    elapsed = time.perf_counter() - started
    assert response.status_code == 202, response.content
    return response.json(), elapsed


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
        posts = []
        with override_settings(
            ADVISORS={
                "UPLOAD_THROTTLE_RATE": "",
                "INGESTION_MAX_CHARS": 0,
                "INGESTION_MAX_DECOMPRESSED_BYTES": 0,
                "INGESTION_CPU_SECONDS": CPU_SECONDS,
            }
        ):
            cpu_bound, took = upload(api, "jack.pdf", heavy)
        posts.append(took)
        jack, took = upload(api, "jack-defaults.pdf", heavy)  # the shipped limits
        posts.append(took)
        bomb, took = upload(api, "bomb.pdf", bomb_pdf())
        posts.append(took)
        good, took = upload(api, "guide.pdf", text_pdf("Bergen has a fish market.", "Oslo."))
        posts.append(took)

        # While the workers chew, small requests of the web side answer at once.
        latencies = []
        deadline = time.monotonic() + CPU_SECONDS
        while time.monotonic() < deadline:
            started = time.perf_counter()
            assert api.get("/api/collections/").status_code == 200
            assert api.get(cpu_bound["url"]).status_code == 200
            latencies.append(time.perf_counter() - started)
            time.sleep(0.05)

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

    assert max(posts) < 2.0, posts  # the request only stores the file (it took 77 s before)
    latencies.sort()
    assert latencies[int(0.95 * (len(latencies) - 1))] < 1.0, latencies

    assert jobs["jack"].status == "failed"
    assert jobs["jack"].errors == [
        {
            "source": None,
            "message": f"the job used more than {CPU_SECONDS} s of CPU time reading jack.pdf "
            "(ADVISORS['INGESTION_CPU_SECONDS'])",
        }
    ]
    # The kernel stopped the reading child at the budget (its accounting rounds differently).
    assert CPU_SECONDS / 2 < jobs["jack"].cpu_seconds < 3 * CPU_SECONDS + 5
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
