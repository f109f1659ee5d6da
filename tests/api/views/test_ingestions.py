"""Uploads as ingestion jobs over REST (issue 18): 202 and the job's status, owner scoping,
sizes (413), quotas (429) and the upload rate, each refusal naming its setting and storing
nothing; a job over the chunk quota fails in the worker."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from django.utils import timezone

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import Collection, Document, IngestionJob
from tests.api.conftest import client_for
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db

NO_RATE = {"UPLOAD_THROTTLE_RATE": ""}


@pytest.fixture
def kb() -> Collection:
    return Collection.objects.create(slug="kb", name="KB")


def text(name: str = "a.md", body: str = "Refunds take five days.") -> dict[str, Any]:
    return {"collection": "kb", "name": name, "text": body}


def files(*sizes: int) -> dict[str, Any]:
    return {
        "collection": "kb",
        "file": [SimpleUploadedFile(f"f{i}.txt", b"x" * size) for i, size in enumerate(sizes)],
    }


def error(response: Any) -> dict[str, Any]:
    return response.json()["error"]


def test_an_upload_answers_202_with_its_job_which_only_its_uploader_sees(
    kb: Collection, api: Any, bob: Any
) -> None:
    response = api.post("/api/documents/", text(), format="json")
    assert response.status_code == 202
    queued = response.json()
    assert set(queued) >= {"id", "status", "done", "total", "errors", "documents"}
    assert (queued["status"], queued["done"], queued["total"]) == ("queued", 0, 0)
    assert (queued["errors"], queued["documents"], queued["sources"]) == ([], [], ["a.md"])
    assert queued["url"] == f"/api/ingestions/{queued['id']}/" == response["Location"]
    assert api.get(queued["url"]).json()["status"] == "queued"

    assert run_queued_tasks() == 1
    done = api.get(queued["url"]).json()
    assert (done["status"], done["done"], done["total"], done["errors"]) == ("done", 1, 1, [])
    assert done["documents"] == [
        {"source": "a.md", "chunks": 1, "added": 1, "unchanged": 0, "removed": 0}
    ]
    assert done["started_at"] and done["finished_at"]

    theirs = client_for(bob)
    assert theirs.get(queued["url"]).status_code == 404  # never "forbidden": it does not exist
    assert error(theirs.get(queued["url"]))["code"] == "not_found"
    assert theirs.get("/api/ingestions/").json()["count"] == 0
    assert [j["id"] for j in api.get("/api/ingestions/").json()["results"]] == [queued["id"]]
    assert api.get("/api/ingestions/not-a-uuid/").status_code == 404
    assert client_for(None).get(queued["url"]).status_code == 401


@override_settings(ADVISORS={**NO_RATE, "UPLOAD_MAX_FILES": 2})
def test_too_many_files_in_one_upload_is_413(kb: Collection, api: Any) -> None:
    assert api.post("/api/documents/", files(1, 1), format="multipart").status_code == 202
    response = api.post("/api/documents/", files(1, 1, 1), format="multipart")
    assert response.status_code == 413
    assert error(response)["code"] == "too_large"
    assert error(response)["message"] == (
        "3 files in one upload, more than 2 (ADVISORS['UPLOAD_MAX_FILES'] = 2)."
    )
    assert IngestionJob.objects.count() == 1


@override_settings(ADVISORS={**NO_RATE, "MAX_UPLOAD_BYTES": 100})
def test_a_file_over_the_size_limit_is_413(kb: Collection, api: Any) -> None:
    response = api.post("/api/documents/", files(50, 101), format="multipart")
    assert response.status_code == 413
    assert error(response)["message"] == (
        "f1.txt is larger than 100 bytes (ADVISORS['MAX_UPLOAD_BYTES'] = 100)."
    )
    too_long = api.post("/api/documents/", text(body="y" * 101), format="json")
    assert too_long.status_code == 413
    assert not IngestionJob.objects.exists()


@override_settings(ADVISORS={**NO_RATE, "UPLOAD_BYTES_PER_DAY": 1000})
def test_bytes_per_day_are_a_429_until_the_window_makes_room(
    kb: Collection, api: Any, bob: Any
) -> None:
    assert api.post("/api/documents/", files(600), format="multipart").status_code == 202
    assert api.post("/api/documents/", files(300), format="multipart").status_code == 202
    response = api.post("/api/documents/", files(200), format="multipart")
    assert response.status_code == 429
    body = error(response)
    assert body["code"] == "quota_exceeded"
    assert body["message"] == (
        "You uploaded 900 bytes in the last 24 hours; 200 more would pass the quota "
        "(ADVISORS['UPLOAD_BYTES_PER_DAY'] = 1000)."
    )
    # The 600 bytes leave the window 24 hours after they came: then there is room.
    assert 86_000 < body["retry_after"] <= 86_400
    assert int(response["Retry-After"]) == pytest.approx(body["retry_after"], abs=1)
    assert (
        client_for(bob).post("/api/documents/", files(200), format="multipart").status_code == 202
    )
    alone = api.post("/api/documents/", files(1001), format="multipart")
    assert alone.status_code == 413 and "more than a day's quota" in error(alone)["message"]
    # A day later the window is empty again.
    IngestionJob.objects.update(created_at=timezone.now() - timedelta(days=1, seconds=1))
    assert api.post("/api/documents/", files(900), format="multipart").status_code == 202


@override_settings(ADVISORS={**NO_RATE, "MAX_CHUNKS_PER_COLLECTION": 3})
def test_chunks_per_collection_refuse_a_full_collection_and_fail_a_job_that_would_pass_it(
    kb: Collection, alice: Any, api: Any
) -> None:
    ingest_text(kb, "shared.md", "Shared chunks count for nobody.")
    ingest_text(kb, "mine.md", "One chunk of Alice's.", owner=alice)
    paragraphs = "\n\n".join(f"Paragraph {i} is about subject {i}. " * 30 for i in range(4))
    api.post("/api/documents/", text("long.md", paragraphs), format="json")
    run_queued_tasks()
    failed = IngestionJob.objects.get()
    assert failed.status == "failed" and failed.documents == []
    [problem] = failed.errors
    assert problem["source"] is None
    assert problem["message"].startswith("kb would hold ")
    assert problem["message"].endswith(
        "of your chunks, more than 3 (ADVISORS['MAX_CHUNKS_PER_COLLECTION'])"
    )
    assert not Document.objects.filter(source="long.md").exists()
    # Re-sending a source replaces its chunks: that counts only once.
    api.post("/api/documents/", text("mine.md", "Alice's chunk, changed."), format="json")
    run_queued_tasks()
    assert IngestionJob.objects.filter(status="done").count() == 1
    for n in range(2):
        api.post("/api/documents/", text(f"more{n}.md", f"More text number {n}."), format="json")
    run_queued_tasks()
    assert Document.objects.filter(owner=alice).count() == 3
    full = api.post("/api/documents/", text("one-more.md"), format="json")
    assert full.status_code == 429 and error(full)["code"] == "quota_exceeded"
    assert error(full)["message"] == (
        "You hold 3 or more chunks in kb already; delete some first "
        "(ADVISORS['MAX_CHUNKS_PER_COLLECTION'] = 3)."
    )


@override_settings(ADVISORS={"UPLOAD_THROTTLE_RATE": "2/minute", "MAX_UPLOAD_BYTES": 10})
def test_uploads_are_throttled_and_refused_ones_use_none_of_the_rate(
    kb: Collection, api: Any, bob: Any
) -> None:
    for _ in range(3):  # too large: refused before the rate is counted
        assert api.post("/api/documents/", text(body="z" * 11), format="json").status_code == 413
    for _ in range(2):
        assert api.post("/api/documents/", text(body="ok"), format="json").status_code == 202
    response = api.post("/api/documents/", text(body="ok"), format="json")
    assert response.status_code == 429
    assert error(response)["code"] == "throttled"
    assert "ADVISORS['UPLOAD_THROTTLE_RATE'] = 2/minute" in error(response)["message"]
    assert 0 < error(response)["retry_after"] <= 60 and response["Retry-After"]
    assert (
        client_for(bob).post("/api/documents/", text(body="ok"), format="json").status_code == 202
    )
    assert IngestionJob.objects.count() == 3
