"""The OpenAPI schema, the offline Swagger UI, and a schemathesis run that finds no 5xx."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from django.contrib.auth.models import Permission
from django.contrib.staticfiles import finders
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from rest_framework.authtoken.models import Token
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error

from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import Collection
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model

ENDPOINTS = {
    "/api/chains/": {"get", "post"},
    "/api/chains/{slug}/": {"get", "put", "patch", "delete"},
    "/api/chains/{slug}/call/": {"post"},
    "/api/chains/{slug}/stream/": {"post"},
    "/api/chains/{slug}/ag-ui/": {"post"},
    "/api/chains/{slug}/ai-sdk/": {"post"},
    "/api/chains/{slug}/ai-sdk/{chat_id}/stream/": {"get"},
    "/api/chains/{slug}/versions/": {"get", "post"},
    "/api/chains/{slug}/versions/{number}/": {"get"},
    "/api/chains/{slug}/versions/{number}/restore/": {"post"},
    "/api/chains/{slug}/diff/": {"get"},
    "/api/chains/{slug}/labels/": {"get"},
    "/api/chains/{slug}/labels/{name}/": {"get", "put"},
    "/api/chains/{slug}/labels/{name}/history/": {"get"},
    "/api/chains/{slug}/labels/{name}/rollback/": {"post"},
    "/api/chains/{slug}/experiments/": {"get", "post"},
    "/api/chains/{slug}/online-evaluations/": {"get", "post"},
    "/api/experiments/{id}/": {"get", "patch"},
    "/api/experiments/{id}/start/": {"post"},
    "/api/experiments/{id}/pause/": {"post"},
    "/api/experiments/{id}/stop/": {"post"},
    "/api/experiments/{id}/conclude/": {"post"},
    "/api/experiments/{id}/results/": {"get"},
    "/api/conversations/": {"get"},
    "/api/conversations/{conversation_id}/": {"get", "patch", "delete"},
    "/api/conversations/{conversation_id}/search/": {"get"},
    "/api/conversations/{conversation_id}/grants/": {"get"},
    "/api/conversations/{conversation_id}/grants/{tool}/": {"delete"},
    "/api/messages/{message_id}/feedback/": {"put", "delete"},
    "/api/approvals/": {"get"},
    "/api/approvals/{id}/": {"get"},
    "/api/approvals/{id}/decision/": {"post"},
    "/api/collections/": {"get", "post"},
    "/api/collections/{slug}/": {"get", "delete"},
    "/api/documents/": {"get", "post"},
    "/api/documents/{document_id}/": {"delete"},
    "/api/documents/search/": {"post"},
    "/api/ingestions/": {"get"},
    "/api/ingestions/{job_id}/": {"get"},
    "/api/usage/": {"get"},
    "/api/eval-runs/{a}/compare/{b}/": {"get"},
}

#: Operations without a request body (the URL says everything).
NO_BODY = {("/api/chains/{slug}/versions/{number}/restore/", "post")}


@pytest.fixture
def openapi(client: Client) -> dict[str, Any]:
    response = client.get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def test_every_endpoint_is_documented_with_bodies_and_errors(openapi: dict[str, Any]) -> None:
    paths = {p: set(ops) - {"parameters"} for p, ops in openapi["paths"].items()}
    assert paths == ENDPOINTS
    for path, methods in ENDPOINTS.items():
        for method in methods:
            operation = openapi["paths"][path][method]
            assert operation.get("summary"), (path, method)
            codes = set(operation["responses"])
            assert "401" in codes, (path, method)
            successes = {code for code in codes if code.startswith("2")}
            assert successes and successes <= {"200", "201", "202", "204"}, (path, method)
            for success in successes - {"204"}:
                assert operation["responses"][success]["content"], (path, method)
            if method in {"post", "put", "patch"} and (path, method) not in NO_BODY:
                assert operation["requestBody"]["content"], (path, method)
            for code in codes - successes:
                [media] = operation["responses"][code]["content"]
                schema = operation["responses"][code]["content"][media]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, (path, method, code)


def test_the_stream_endpoint_documents_server_sent_events(openapi: dict[str, Any]) -> None:
    stream = openapi["paths"]["/api/chains/{slug}/stream/"]["post"]
    assert set(stream["responses"]["200"]["content"]) == {"text/event-stream"}
    for event in ("`start`", "`delta`", "`done`", "`error`"):
        assert event in stream["description"]
    call = openapi["paths"]["/api/chains/{slug}/call/"]["post"]
    assert {"429", "502", "503", "504"} <= set(call["responses"])
    error = openapi["components"]["schemas"]["ErrorDetail"]["properties"]
    assert set(error) == {
        "code",
        "message",
        "fields",
        "provider_status",
        "retry_after",
        "conversation_id",
        "trace_id",
        "reset_at",
    }


def test_the_protocol_endpoints_document_their_bodies_and_streams(
    openapi: dict[str, Any],
) -> None:
    schemas = openapi["components"]["schemas"]
    for path, body, words in (
        ("/api/chains/{slug}/ag-ui/", "AgUiRunAgentInput", ("`RUN_STARTED`", "`RUN_ERROR`")),
        ("/api/chains/{slug}/ai-sdk/", "AiSdkChat", ("`source-document`", "[DONE]")),
    ):
        operation = openapi["paths"][path]["post"]
        assert set(operation["responses"]["200"]["content"]) == {"text/event-stream"}
        assert all(word in operation["description"] for word in words), path
        media = operation["requestBody"]["content"]["application/json"]
        assert media["schema"] == {"$ref": f"#/components/schemas/{body}Request"}
    required = set(schemas["AgUiRunAgentInputRequest"]["required"])
    assert {"threadId", "runId", "messages"} <= required
    assert {"id", "messages"} <= set(schemas["AiSdkChatRequest"]["required"])


def test_swagger_ui_is_served_without_any_cdn(client: Client) -> None:
    page = client.get("/api/docs/").content.decode()
    # Its set-up script is a file of its own, so the site's CSP lets it run (no inline script).
    assert '<script src="/api/docs/?script="></script>' in page
    assert "/api/schema/" in client.get("/api/docs/?script=").content.decode()
    assert "cdn" not in page.lower() and "https://" not in page
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in page
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")


def reached_the_application(response: Any) -> bool:
    """Whether Django answered: Twisted rejects unparsable HTTP with a bare status line, and
    Daphne answers invalid header or path bytes with its own page, before any view runs."""
    content_type = response.headers.get("content-type", [""])[0]
    return bool(content_type) and "Daphne" not in response.text


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_fuzzed_requests_never_get_a_server_error(live_api: str, staff: Any) -> None:
    """Every operation, with valid and invalid data, as staff with the version permissions;
    bounded (a few examples each).

    Operations on a chain run once with random slugs and once on a real chain (its version 1
    and production label), so the fuzzed messages and params reach the turn service and the
    fuzzed versions and reasons reach publish, label moves and rollback.
    """
    make_chain("fuzz", model=scripted_model("fuzz-model", responses=["ok"]))
    staff.user_permissions.add(
        *Permission.objects.filter(
            content_type__app_label="advisors_app",
            codename__in=[
                "add_chainversion",
                "change_chainlabel",
                "promote_production",
                "change_advisorchain",
            ],
        )
    )
    known = {"slug": "fuzz", "number": 1, "name": "production"}
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.", metadata={"year": 2024})
    token, _ = Token.objects.get_or_create(user=staff)
    auth = {"Authorization": f"Token {token.key}"}
    loaded = schemathesis.openapi.from_url(f"{live_api}/api/schema/?format=json")
    runs = []
    for result in loaded.get_all_operations():
        operation = result.ok()
        runs += [(operation, mode, None) for mode in GenerationMode]
        if "{slug}" in operation.path and operation.path.startswith("/api/chains/"):
            real = {name: value for name, value in known.items() if f"{{{name}}}" in operation.path}
            runs.append((operation, GenerationMode.POSITIVE, real))
    assert len(runs) > 2 * len(ENDPOINTS)
    unsatisfiable: list[str] = []
    for operation, mode, path_parameters in runs:

        @given(case=operation.as_strategy(mode, path_parameters=path_parameters))
        @settings(
            max_examples=5,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
            phases=[Phase.generate],
        )
        def call(case: Any) -> None:
            response = case.call(headers=auth, timeout=60)
            case.validate_response(response, checks=[not_a_server_error])
            if response.status_code >= 400 and reached_the_application(response):
                # The one error shape, never an HTML page.
                assert response.headers["content-type"][0] == "application/json", response.text
                assert set(response.json()["error"]) >= {"code", "message", "fields"}

        try:
            call()
        except Unsatisfiable:
            # Nothing to make invalid (an operation without parameters or body).
            assert mode is GenerationMode.NEGATIVE, operation.label
            unsatisfiable.append(operation.label)
    assert len(unsatisfiable) < len(runs) // 4, unsatisfiable


def test_the_chat_request_types_params_and_its_first_example_runs(
    openapi: dict[str, Any], alice: Any
) -> None:
    """Swagger UI sends the schema's first example (else one made from the types: a
    "string" for an untyped field, which params refused with a 400)."""
    chat = openapi["components"]["schemas"]["ChatRequest"]
    assert chat["properties"]["params"]["type"] == "object"
    assert {"type": "integer", "minimum": 1} in chat["properties"]["version"]["oneOf"]
    operation = openapi["paths"]["/api/chains/{slug}/call/"]["post"]
    examples = operation["requestBody"]["content"]["application/json"]["examples"]
    first = next(iter(examples.values()))["value"]
    assert first == {"message": "How do refunds work?"}
    make_chain("helper", model=scripted_model("helper-model", responses=["ok", "ok"]))
    api = client_for(alice)
    assert api.post("/api/chains/helper/call/", first, format="json").status_code == 200
    with_params = next(e["value"] for e in examples.values() if "params" in e["value"])
    assert api.post("/api/chains/helper/call/", with_params, format="json").status_code == 200
