"""Admin of collections: document upload as an ingestion job, the job's page, documents list."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from advisors_app.models import Collection, Document, IngestionJob
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db


def test_uploading_a_file_queues_a_job_whose_page_follows_it(
    admin_client: Client, admin_user
) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    page = admin_client.get(f"/admin/advisors_app/collection/{collection.pk}/change/")
    assert "Upload documents" in page.content.decode()
    url = f"/admin/advisors_app/collection/{collection.pk}/upload/"
    assert admin_client.get(url).status_code == 200
    text = b"# Refunds\n\nRefunds take 5 days.\n"
    response = admin_client.post(
        url, {"file": SimpleUploadedFile("policy.md", text, "text/markdown")}, follow=True
    )
    job = IngestionJob.objects.get()
    assert response.redirect_chain[-1][0] == f"/admin/advisors_app/ingestionjob/{job.pk}/change/"
    shown = [str(m) for m in response.context["messages"]]
    assert shown == ["Queued policy.md for ingestion; this page follows its progress."]
    queued = response.content.decode()
    assert "waiting for a worker" in queued and 'http-equiv="refresh"' in queued
    assert not Document.objects.exists()

    assert run_queued_tasks() == 1
    done = admin_client.get(f"/admin/advisors_app/ingestionjob/{job.pk}/change/")
    body = done.content.decode()
    assert "policy.md: 1 chunks (1 added, 0 unchanged, 0 removed)" in body
    assert 'http-equiv="refresh"' not in body  # a finished job's page stays still
    document = Document.objects.get()
    assert (document.source, document.owner) == ("policy.md", None)
    assert "Refunds take 5 days." in document.content
    admin_client.post(
        url,
        {"file": SimpleUploadedFile("policy.md", text, "text/markdown"), "owner": admin_user.pk},
    )
    run_queued_tasks()
    assert Document.objects.filter(owner=admin_user).count() == 1  # a private copy
    listing = admin_client.get("/admin/advisors_app/ingestionjob/").content.decode()
    assert listing.count('<td class="field-files">policy.md</td>') == 2
    assert "1 / 1 chunks" in listing
    listing = admin_client.get("/admin/advisors_app/document/").content.decode()
    assert "policy.md" in listing and "Refunds take 5 days." in listing
    assert admin_client.get("/admin/advisors_app/collection/").status_code == 200


def test_a_job_that_failed_shows_why(admin_client: Client) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    url = f"/admin/advisors_app/collection/{collection.pk}/upload/"
    admin_client.post(url, {"file": SimpleUploadedFile("broken.pdf", b"%PDF-1.4 nonsense")})
    run_queued_tasks()
    job = IngestionJob.objects.get()
    assert job.status == "failed"
    page = admin_client.get(f"/admin/advisors_app/ingestionjob/{job.pk}/change/").content.decode()
    assert "broken.pdf: broken.pdf is not a readable PDF" in page
    listing = admin_client.get("/admin/advisors_app/ingestionjob/").content.decode()
    assert "Failed" in listing and "broken.pdf is not a readable PDF" in listing
    assert str(job) == "broken.pdf → kb (failed)"


def test_an_unsupported_file_is_a_form_error(admin_client: Client) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    url = f"/admin/advisors_app/collection/{collection.pk}/upload/"
    response = admin_client.post(
        url, {"file": SimpleUploadedFile("data.xlsx", b"\x00\x01", "application/vnd.ms-excel")}
    )
    assert response.status_code == 200
    assert response.context["form"].errors["file"]
    assert not Document.objects.exists() and not IngestionJob.objects.exists()
