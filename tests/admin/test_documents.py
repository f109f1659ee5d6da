"""Admin of collections: document upload through the ingestion service, documents list."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from advisors_app.models import Collection, Document

pytestmark = pytest.mark.django_db


def test_uploading_a_file_ingests_it_and_re_uploading_changes_nothing(
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
    shown = [str(m) for m in response.context["messages"]]
    assert shown == ["Ingested policy.md: 1 chunks (1 added, 0 unchanged, 0 removed)."]
    document = Document.objects.get()
    assert (document.source, document.owner) == ("policy.md", None)
    assert "Refunds take 5 days." in document.content
    response = admin_client.post(
        url,
        {"file": SimpleUploadedFile("policy.md", text, "text/markdown"), "owner": admin_user.pk},
        follow=True,
    )
    assert "1 added" in str(next(iter(response.context["messages"])))  # a private copy
    assert Document.objects.filter(owner=admin_user).count() == 1
    listing = admin_client.get("/admin/advisors_app/document/").content.decode()
    assert "policy.md" in listing and "Refunds take 5 days." in listing
    assert admin_client.get("/admin/advisors_app/collection/").status_code == 200


def test_an_unsupported_file_is_a_form_error(admin_client: Client) -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    url = f"/admin/advisors_app/collection/{collection.pk}/upload/"
    response = admin_client.post(
        url, {"file": SimpleUploadedFile("data.xlsx", b"\x00\x01", "application/vnd.ms-excel")}
    )
    assert response.status_code == 200
    assert response.context["form"].errors["file"]
    assert not Document.objects.exists()
