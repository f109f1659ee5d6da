"""``manage.py ingest``: files and directories into a collection with the real offline
embedding model, idempotent on re-runs, and a semantic search that finds the right chunk;
``--async`` queues a job for the task worker instead."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from advisors_app.core.vectorstore import SearchRequest
from advisors_app.models import Collection, IngestionJob
from advisors_app.models import Document as DocumentRow
from advisors_app.stores.vectors import PgVectorStore
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def docs(tmp_path):
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "cities.md").write_text(
        "# Oslo\n\nOslo is the capital of Norway, on the Oslofjord.\n\n"
        "# Bergen\n\nBergen is a rainy city on the west coast, famous for its fish market.\n"
    )
    (tmp_path / "guide" / "food.html").write_text(
        "<html><title>Food</title><body><p>Brunost is a sweet brown cheese.</p></body></html>"
    )
    (tmp_path / "guide" / "ignored.bin").write_bytes(b"\x00\x01")
    (tmp_path / "faq.txt").write_text("Trains between Oslo and Bergen take about seven hours.")
    return tmp_path


def run(*args):
    out = StringIO()
    call_command("ingest", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_ingests_files_and_directories_idempotently(docs):
    output = run(
        "kb", str(docs / "guide"), str(docs / "faq.txt"), "--create", "--metadata", '{"lang": "en"}'
    )
    assert output.splitlines() == [
        "cities.md: 2 chunks (2 added, 0 unchanged, 0 removed)",
        "food.html: 1 chunks (1 added, 0 unchanged, 0 removed)",
        "faq.txt: 1 chunks (1 added, 0 unchanged, 0 removed)",
    ]
    again = run("kb", str(docs / "guide"), str(docs / "faq.txt"))
    assert "(0 added, 2 unchanged, 0 removed)" in again
    collection = Collection.objects.get(slug="kb")
    assert DocumentRow.objects.filter(collection=collection).count() == 4
    store = PgVectorStore(collection)
    [best] = store.similarity_search(SearchRequest("Which city has a fish market?", top_k=1))
    assert "Bergen is a rainy city" in best.text
    assert best.metadata["source"] == "cities.md" and best.metadata["section"] == "Bergen"
    assert best.metadata["lang"] == "en"


def test_errors_are_command_errors(docs):
    with pytest.raises(
        CommandError, match=r"no collection 'nope'; create it in the admin or pass --create"
    ):
        run("nope", str(docs))
    Collection.objects.create(slug="kb", name="KB")
    with pytest.raises(CommandError, match=r"no such file or directory"):
        run("kb", str(docs / "missing"))
    with pytest.raises(CommandError, match=r"--metadata must be a JSON object"):
        run("kb", str(docs), "--metadata", "[1]")
    with pytest.raises(CommandError, match=r"no user 'ghost'"):
        run("kb", str(docs), "--owner", "ghost")


def test_async_queues_one_job_for_the_worker_and_prints_it(docs):
    Collection.objects.create(slug="kb", name="KB")
    queued = json.loads(run("kb", str(docs / "guide"), "--async", "--chunk-size", "64"))
    assert queued["status"] == "queued" and (queued["done"], queued["total"]) == (0, 0)
    job = IngestionJob.objects.get(pk=queued["id"])
    assert job.sources == ["cities.md", "food.html"] and job.created_by is None
    assert job.options["chunk_size"] == 64 and not DocumentRow.objects.exists()
    assert run_queued_tasks() == 1
    job.refresh_from_db()
    assert job.status == "done", job.errors
    assert [d["source"] for d in job.documents] == ["cities.md", "food.html"]
    assert DocumentRow.objects.filter(source="cities.md").count() == 2


def test_a_file_over_a_parsing_limit_is_a_command_error(docs):
    Collection.objects.create(slug="kb", name="KB")
    with (
        override_settings(ADVISORS={"INGESTION_MAX_CHARS": 20}),
        pytest.raises(
            CommandError, match=r"faq.txt: faq.txt holds 54 characters of text, more than 20 "
        ),
    ):
        run("kb", str(docs / "faq.txt"))
    assert not DocumentRow.objects.exists()
