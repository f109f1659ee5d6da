"""A collection slug the caller may not see answers exactly as one no collection has (issue 36):
same status, same body, on every endpoint that takes a slug — read and delete a collection,
upload (JSON and files), list documents filtered by collection, search — so no answer tells a
user that another user's private collection, or another tenant's, exists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings
from rest_framework.test import APIClient

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import Collection, IngestionJob

pytestmark = pytest.mark.django_db

SLUG = "bobs-secret-plans"


def tenant_of(user: Any) -> str:
    """``ADVISORS["TENANT_RESOLVER"]`` of these tests: Alice works for Acme, others for Globex."""
    return "acme" if user.username == "alice" else "globex"


def upload_file(api: APIClient, slug: str) -> Any:
    part = SimpleUploadedFile("plans.txt", b"Buy Acme.", content_type="text/plain")
    return api.post("/api/documents/", {"collection": slug, "file": [part]}, format="multipart")


#: Every request that names a collection by slug, by what it does.
REQUESTS: dict[str, Callable[[APIClient, str], Any]] = {
    "read": lambda api, slug: api.get(f"/api/collections/{slug}/"),
    "delete": lambda api, slug: api.delete(f"/api/collections/{slug}/"),
    "upload text": lambda api, slug: api.post(
        "/api/documents/", {"collection": slug, "name": "n.md", "text": "Hi."}, format="json"
    ),
    "upload files": upload_file,
    "list documents": lambda api, slug: api.get("/api/documents/", {"collection": slug}),
    "search": lambda api, slug: api.post(
        "/api/documents/search/", {"collection": slug, "query": "plans"}, format="json"
    ),
    "search with a filter": lambda api, slug: api.post(
        "/api/documents/search/",
        {"collection": slug, "query": "plans", "filter": "source == 'plans.md'"},
        format="json",
    ),
}


def answer(response: Any) -> tuple[int, bytes, dict[str, str]]:
    headers = {k: v for k, v in response.items() if k in ("Content-Type", "Retry-After")}
    return response.status_code, response.content, headers


def hidden_and_missing(
    api: APIClient, make: Callable[[], Collection], request: Callable[[APIClient, str], Any]
) -> tuple[Any, Any]:
    """The answer to ``request`` for a collection ``make`` creates, then for the same slug
    once no collection has it."""
    collection = make()
    hidden = answer(request(api, SLUG))
    assert Collection.objects.filter(pk=collection.pk).exists()  # nothing was done to it
    collection.delete()
    return hidden, answer(request(api, SLUG))


def bobs_collection(bob: Any) -> Collection:
    collection = Collection.objects.create(slug=SLUG, name="Bob's plans", owner=bob)
    ingest_text(collection, "plans.md", "Buy Acme on Friday.", {}, bob)
    return collection


@pytest.mark.parametrize("name", REQUESTS)
def test_another_users_collection_answers_as_a_missing_one(
    api: APIClient, bob: Any, name: str
) -> None:
    hidden, missing = hidden_and_missing(api, lambda: bobs_collection(bob), REQUESTS[name])
    assert hidden == missing
    assert hidden[0] in (200, 400, 404)
    assert b"Bob" not in hidden[1] and b"Acme" not in hidden[1]
    assert not IngestionJob.objects.exists()


@pytest.mark.parametrize("name", REQUESTS)
@override_settings(ADVISORS={"TENANT_RESOLVER": f"{__name__}.tenant_of"})
def test_another_tenants_collection_answers_as_a_missing_one(api: APIClient, name: str) -> None:
    def globex_collection() -> Collection:
        collection = Collection.objects.create(slug=SLUG, name="Globex plans", tenant="globex")
        ingest_text(collection, "plans.md", "Buy Acme on Friday.", {}, tenant="globex")
        return collection

    hidden, missing = hidden_and_missing(api, globex_collection, REQUESTS[name])
    assert hidden == missing
    assert b"Globex" not in hidden[1] and b"Acme" not in hidden[1]
    assert not IngestionJob.objects.exists()


@override_settings(ADVISORS={"UPLOAD_THROTTLE_RATE": "1/minute"})
def test_a_used_up_upload_rate_says_nothing_about_hidden_collections(
    api: APIClient, alice: Any, bob: Any
) -> None:
    Collection.objects.create(slug="mine", name="Mine", owner=alice)
    assert REQUESTS["upload text"](api, "mine").status_code == 202
    assert REQUESTS["upload text"](api, "mine").status_code == 429
    hidden, missing = hidden_and_missing(api, lambda: bobs_collection(bob), REQUESTS["upload text"])
    assert hidden == missing
