"""Collections and documents over REST: upload (a job run by the task worker), list, delete
and search, scoped per caller."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import override_settings

from advisors_app.definition.runtime import load_chain
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import Collection, Document, IngestionFile, IngestionJob
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model
from tests.task_worker import run_queued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture
def library(alice: Any, bob: Any) -> None:
    """A shared collection (a shared document, one of Alice's, one of Bob's) and Bob's own."""
    shared = Collection.objects.create(slug="kb", name="KB")
    ingest_text(shared, "policy.md", "Refunds take 5 days.", {"topic": "refunds", "year": 2024})
    ingest_text(shared, "alice.md", "Alice's refund code is 1234.", {"topic": "refunds"}, alice)
    ingest_text(shared, "bob.md", "Bob's refund code is 9876.", {"topic": "refunds"}, bob)
    Collection.objects.create(slug="bobs", name="Bob's notes", owner=bob)


def test_collections_are_shared_ones_and_the_callers_own(library: None, api: Any) -> None:
    assert [c["slug"] for c in api.get("/api/collections/").json()["results"]] == ["kb"]
    created = api.post("/api/collections/", {"slug": "mine", "name": "Mine"}, format="json")
    assert created.status_code == 201
    assert created.json()["shared"] is False
    assert Collection.objects.get(slug="mine").owner.username == "alice"
    listed = api.get("/api/collections/").json()["results"]
    assert [(c["slug"], c["shared"]) for c in listed] == [("kb", True), ("mine", False)]
    taken = api.post("/api/collections/", {"slug": "bobs", "name": "Mine too"}, format="json")
    assert taken.status_code == 400 and "slug" in taken.json()["error"]["fields"]


def test_the_document_list_holds_shared_and_own_documents_only(library: None, api: Any) -> None:
    body = api.get("/api/documents/").json()
    assert [(d["source"], d["shared"]) for d in body["results"]] == [
        ("alice.md", False),
        ("policy.md", True),
    ]
    assert set(body["results"][0]) == {
        "id",
        "collection",
        "source",
        "text",
        "metadata",
        "shared",
        "created_at",
    }
    only = api.get("/api/documents/", {"source": "policy.md"}).json()["results"]
    assert [d["text"] for d in only] == ["Refunds take 5 days."]
    assert api.get("/api/documents/", {"collection": "bobs"}).json()["count"] == 0


@pytest.mark.parametrize(
    ("path", "query", "field", "message"),
    [
        ("/api/documents/", {"collection": "kb\x00"}, "collection", "Null characters"),
        ("/api/conversations/", {"x\x00": "1"}, "x\x00", "Null characters"),
        ("/api/conversations/a%00b/", {}, "conversation_id", "Null characters"),
    ],
)
def test_parameters_postgresql_cannot_hold_are_field_errors(
    library: None, api: Any, path: str, query: dict[str, str], field: str, message: str
) -> None:
    response = api.get(path, query)
    assert response.status_code == 400
    [text] = response.json()["error"]["fields"][field]
    assert text.startswith(message)


def upload_and_run(client: Any, data: dict[str, Any], format: str = "json") -> dict[str, Any]:
    """POST an upload (202 with a queued job), run the worker, and return the finished job."""
    response = client.post("/api/documents/", data, format=format)
    assert response.status_code == 202, response.content
    queued = response.json()
    assert queued["status"] == "queued" and response["Location"] == queued["url"]
    assert run_queued_tasks() == 1
    return client.get(queued["url"]).json()


def test_uploading_text_as_json(library: None, alice: Any, bob: Any, api: Any) -> None:
    upload = {
        "collection": "kb",
        "name": "faq.md",
        "text": "# FAQ\n\nShipping is free.",
        "metadata": {"lang": "en"},
    }
    job = upload_and_run(api, upload)
    assert job["status"] == "done", job
    assert (job["done"], job["total"], job["errors"]) == (1, 1, [])
    assert job["documents"] == [
        {"source": "faq.md", "chunks": 1, "added": 1, "unchanged": 0, "removed": 0}
    ]
    assert job["collection"] == "kb" and job["sources"] == ["faq.md"]
    row = Document.objects.get(source="faq.md")
    assert row.owner == alice and row.metadata["lang"] == "en"
    again = upload_and_run(api, upload)["documents"][0]
    assert (again["added"], again["unchanged"]) == (0, 1)  # idempotent per source
    assert not any(
        d["source"] == "faq.md" for d in client_for(bob).get("/api/documents/").json()["results"]
    )


def test_uploading_files_as_multipart(library: None, api: Any) -> None:
    files = [
        SimpleUploadedFile("guide.md", b"# Guide\n\nPress the red button.", "text/markdown"),
        SimpleUploadedFile("page.html", b"<html><body><p>Opening hours: 9-17.</p></body></html>"),
    ]
    job = upload_and_run(
        api, {"collection": "kb", "file": files, "metadata": '{"lang": "en"}'}, "multipart"
    )
    assert job["status"] == "done", job
    assert [d["source"] for d in job["documents"]] == ["guide.md", "page.html"]
    html = Document.objects.get(source="page.html")
    assert "Opening hours: 9-17." in html.content and "<p>" not in html.content
    assert html.metadata["lang"] == "en"
    assert not IngestionFile.objects.exists()  # the uploaded bytes go once the job ends


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        (
            {
                "collection": "kb",
                "file": [
                    SimpleUploadedFile("a.md", b"ok"),
                    SimpleUploadedFile("b.exe", b"MZ", "application/octet-stream"),
                ],
            },
            "file",
            "cannot read 'b.exe': supported types are",
        ),
        (
            {"collection": "bobs", "file": [SimpleUploadedFile("e.md", b"ok")]},
            "collection",
            "No collection 'bobs' that you may use.",
        ),
        (
            {"collection": "kb", "file": [SimpleUploadedFile("f.md", b"ok")], "metadata": "{bad"},
            "metadata",
            "Value must be valid JSON.",
        ),
        (
            {"collection": "kb", "file": [SimpleUploadedFile("f.md", b"ok")], "metadata": "[1]"},
            "metadata",
            "Enter a JSON object.",
        ),
        (
            {
                "collection": "kb",
                "file": [SimpleUploadedFile("i.md", b"ok")],
                "metadata": '{"k": ["\\u0000"]}',
            },
            "metadata",
            "k.0: Null characters are not allowed.",
        ),
    ],
)
def test_a_refused_upload_stores_nothing(
    library: None, api: Any, data: dict[str, Any], field: str, message: str
) -> None:
    before = Document.objects.count()
    response = api.post("/api/documents/", data, format="multipart")
    assert response.status_code == 400
    [text] = response.json()["error"]["fields"][field]
    assert text.startswith(message), text
    assert Document.objects.count() == before and not IngestionJob.objects.exists()


@pytest.mark.parametrize(
    ("files", "source", "message"),
    [
        ([SimpleUploadedFile("c.txt", b"\xff\xfe\xfa")], "c.txt", "c.txt is not UTF-8 text"),
        ([SimpleUploadedFile("d.pdf", b"not a pdf")], "d.pdf", "d.pdf is not a readable PDF"),
        (
            [SimpleUploadedFile("ok.md", b"# Fine"), SimpleUploadedFile("h.txt", b"a\x00b")],
            "h.txt",
            "h.txt is not text: it holds NUL characters",
        ),
    ],
)
def test_an_unreadable_file_fails_its_job_and_stores_nothing(
    library: None, api: Any, files: list[Any], source: str, message: str
) -> None:
    before = Document.objects.count()
    job = upload_and_run(api, {"collection": "kb", "file": files}, "multipart")
    assert job["status"] == "failed"
    [error] = job["errors"]
    assert error["source"] == source and error["message"].startswith(message), error
    assert job["documents"] == [] and Document.objects.count() == before  # all or nothing


def test_only_your_own_documents_can_be_deleted(library: None, api: Any) -> None:
    mine = Document.objects.get(source="alice.md").pk
    shared = Document.objects.get(source="policy.md").pk
    theirs = Document.objects.get(source="bob.md").pk
    assert api.delete(f"/api/documents/{shared}/").status_code == 403
    assert api.delete(f"/api/documents/{theirs}/").status_code == 404
    assert api.delete(f"/api/documents/{mine}/").status_code == 204
    assert set(Document.objects.values_list("source", flat=True)) == {"policy.md", "bob.md"}


def search(client: Any, **body: Any) -> Any:
    return client.post("/api/documents/search/", {"collection": "kb", **body}, format="json")


def test_search_sees_shared_and_own_documents_only(library: None, api: Any, bob: Any) -> None:
    found = search(api, query="What is my refund code?", top_k=10).json()
    texts = [r["text"] for r in found]
    assert "Alice's refund code is 1234." in texts and "Refunds take 5 days." in texts
    assert not any("9876" in t for t in texts)
    assert all(0 <= r["score"] <= 1 for r in found)
    assert found == sorted(found, key=lambda r: -r["score"])
    # A filter narrows the scope; it can never widen it to Bob's rows.
    narrowed = search(api, query="refund code", filter="source == 'bob.md' || year == 2024")
    assert [r["metadata"]["source"] for r in narrowed.json()] == ["policy.md"]
    theirs = [r["text"] for r in search(client_for(bob), query="refund code", top_k=10).json()]
    assert "Bob's refund code is 9876." in theirs and not any("1234" in t for t in theirs)


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        (
            {"filter": "year >= 2020 &&"},
            "filter",
            "Invalid filter expression at line 1, column 16: unexpected end of expression",
        ),
        ({"filter": "year => 2020"}, "filter", "Invalid filter expression at line 1, column 6"),
        ({"top_k": 0}, "top_k", "Ensure this value is greater than or equal to 1."),
        ({"similarity_threshold": 2}, "similarity_threshold", "Ensure this value is less than"),
        ({"collection": "bobs"}, "collection", "No collection 'bobs' that you may use."),
        ({"query": ""}, "query", "This field may not be blank."),
    ],
)
def test_invalid_searches_name_the_problem(
    library: None, api: Any, body: dict[str, Any], field: str, message: str
) -> None:
    response = search(api, **{"query": "refund", **body})
    assert response.status_code == 400
    [text] = response.json()["error"]["fields"][field]
    assert text.startswith(message), text


def tenant_of(user: Any) -> str:
    """The test's ``ADVISORS["TENANT_RESOLVER"]``: Alice works for Acme, everyone else Globex."""
    return "acme" if user.username == "alice" else "globex"


@pytest.fixture
def tenants(alice: Any) -> None:
    shared = Collection.objects.create(slug="kb", name="KB")
    ingest_text(shared, "acme.md", "Acme refunds take 5 days.", tenant="acme")
    ingest_text(shared, "globex.md", "Globex refunds take 9 days.", tenant="globex")
    ingest_text(shared, "untenanted.md", "Refunds are a right.")
    Collection.objects.create(slug="acme-only", name="Acme", tenant="acme")
    Collection.objects.create(slug="globex-only", name="Globex", tenant="globex")
    make_chain(
        "qa",
        model=scripted_model("qa-model", responses=["ok"]),
        advisors=(("question_answer", {"collection": "kb", "top_k": 10}),),
    )


@override_settings(ADVISORS={"TENANT_RESOLVER": f"{__name__}.tenant_of"})
@pytest.mark.django_db(transaction=True)
def test_a_tenant_sees_and_retrieves_its_own_documents_only(tenants: None, api: Any) -> None:
    collections = [c["slug"] for c in api.get("/api/collections/").json()["results"]]
    assert collections == ["acme-only", "kb"]
    listed = api.get("/api/documents/").json()["results"]
    assert [d["source"] for d in listed] == ["acme.md"]
    found = search(api, query="How long do refunds take?", top_k=10).json()
    assert [r["metadata"]["source"] for r in found] == ["acme.md"]
    # Filters narrow the tenant's scope and can never reach another tenant's rows.
    assert search(api, query="refunds", filter="source == 'globex.md'").json() == []
    assert search(api, query="x", collection="globex-only").status_code == 400

    upload = {"collection": "kb", "name": "new.md", "text": "Acme ships on Mondays."}
    assert upload_and_run(api, upload)["status"] == "done"
    assert Document.objects.get(source="new.md").tenant == "acme"

    # A chain's retrieval is scoped the same way for the caller.
    assert (
        api.post("/api/chains/qa/call/", {"message": "refunds?"}, format="json").status_code == 200
    )
    prompt = load_chain("qa").client.chat_model.prompts[-1].user_message.text
    assert "Acme refunds take 5 days." in prompt and "Acme ships on Mondays." in prompt
    assert "Globex" not in prompt and "Refunds are a right." not in prompt
