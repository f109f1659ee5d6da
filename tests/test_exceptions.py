"""One refusal type (issue 35): every refusal the Django layer raises is a
:class:`~advisors_app.exceptions.Refusal` with ``code``, ``http_status`` and ``fields``, drawn in
the module's tree, and every transport — REST bodies, SSE and websocket ``error`` frames, MCP
tool errors — says the same thing about one."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from mcp.client import ClientSession
from mcp.client.streamable_http import streamable_http_client

import advisors_app
from advisors_app import exceptions
from advisors_app.api.errors import Conflict, api_exception_handler
from advisors_app.definition.lint import LintMessage
from advisors_app.definition.runtime import ChainNotFound, VersionNotFound
from advisors_app.definition.versions import PublishError, VersionLookupError
from advisors_app.evaluation.evaluators import EvaluatorParamsError
from advisors_app.evaluation.feedback import FeedbackError
from advisors_app.evaluation.runs import EvalRunError
from advisors_app.exceptions import Refusal, TurnError
from advisors_app.experiments.editing import ExperimentError
from advisors_app.ingestion.uploads import UploadRefused
from advisors_app.mcp_server import stop_endpoints
from advisors_app.models import AdvisorChain
from advisors_app.turn import events
from advisors_app.turn.events import error_event
from advisorsite.asgi import application
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model
from tests.mcp_server.conftest import token_of
from tests.test_consumers import frames_until_end, open_socket

#: One refusal of each class, as the app raises it.
EXAMPLES: list[Refusal] = [
    Refusal("The request is invalid.", fields={"message": ["This field may not be blank."]}),
    TurnError("throttled", "Too many turns.", http_status=429, retry_after=3.0),
    Conflict("Nothing to roll back to.", code="protected"),
    FeedbackError("not_found", "No reply has this id.", http_status=404),
    UploadRefused("Too large.", http_status=413, code="too_large", setting="MAX_UPLOAD_BYTES"),
    PublishError(AdvisorChain(slug="desk"), [LintMessage("advisors_app.E108", "error", "Bad.")]),
    ChainNotFound("desk"),
    VersionNotFound("chain 'desk' has no label 'staging'"),
    VersionLookupError("chain 'desk' has no version 7"),
    EvalRunError("No dataset 'missing'."),
    EvaluatorParamsError({"params.pattern": ["Not a regular expression."]}, "regex"),
    ExperimentError("The experiment is invalid.", fields={"arms": ["Sum to 10000."]}),
]


def refusal_classes() -> set[type[Refusal]]:
    """Every subclass of :class:`Refusal` the app defines (each module imported)."""
    for module in pkgutil.walk_packages(advisors_app.__path__, "advisors_app."):
        if ".migrations" not in module.name:
            importlib.import_module(module.name)
    found: set[type[Refusal]] = set()
    todo = [Refusal]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo.extend(cls.__subclasses__())
    return {cls for cls in found if cls.__module__.startswith("advisors_app.")}


def test_every_refusal_class_has_an_example_a_code_a_status_and_fields() -> None:
    classes = refusal_classes()
    assert classes == {type(example) for example in EXAMPLES}
    for example in EXAMPLES:
        assert isinstance(example.code, str) and example.code, example
        assert 400 <= example.http_status < 600, example
        assert isinstance(example.fields, dict), example
        assert str(example) == example.message


def test_every_refusal_class_is_in_the_tree_with_a_raised_when_docstring() -> None:
    tree = exceptions.__doc__ or ""
    for cls in refusal_classes():
        assert f" {cls.__name__} " in tree, cls
        assert (cls.__doc__ or "").startswith("Raised when"), cls


def test_the_old_names_and_bases_keep_working() -> None:
    # Callers catching the builtin base (``except ValueError``/``LookupError``) still do.
    assert isinstance(PublishError(AdvisorChain(slug="desk"), []), ValueError)
    assert isinstance(ChainNotFound("desk"), LookupError)
    assert events.TurnError is TurnError  # its import path before exceptions.py
    refused = TurnError("invalid", "No.", errors={"message": ["Blank."]})
    assert refused.errors == refused.fields == {"message": ["Blank."]}
    upload = UploadRefused("Too many.", http_status=429, code="throttled", setting="S")
    assert (upload.http_status, upload.code, upload.setting) == (429, "throttled", "S")


def test_a_refusal_is_one_body_and_one_frame_with_the_same_content() -> None:
    secret = "sk-proj-abcdefghijklmnop1234"
    refusal = Refusal(
        f"Over budget with key {secret}.",
        code="budget_exceeded",
        http_status=429,
        fields={"params": [f"quoted {secret}"]},
        retry_after=42.0,
        conversation_id="c-1",
        trace_id="t-1",
        reset_at="2026-12-08T00:00:00+00:00",
    )
    response = api_exception_handler(refusal, {})
    frame = error_event(refusal).to_dict()
    body = response.data["error"]
    assert response.status_code == 429 and response["Retry-After"] == "42"
    assert secret not in str(body) and secret not in str(frame)
    assert body == {
        "code": frame["code"],
        "message": frame["message"],
        "fields": frame["errors"],
        "provider_status": None,
        "retry_after": frame["retry_after"],
        "conversation_id": frame["conversation_id"],
        "trace_id": frame["trace_id"],
        "reset_at": frame["reset_at"],
    }
    assert (frame["code"], frame["retry_after"], frame["reset_at"]) == (
        "budget_exceeded",
        42.0,
        "2026-12-08T00:00:00+00:00",
    )


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: type(e).__name__)
def test_every_refusal_answers_rest_with_its_status_code_and_fields(example: Refusal) -> None:
    response = api_exception_handler(example, {})
    error = response.data["error"]
    assert response.status_code == example.http_status
    assert (error["code"], error["message"], error["fields"]) == (
        example.code,
        example.message,
        example.fields,
    )


# -- one refused input on every transport ------------------------------------------------------


@pytest.fixture
async def stopped_endpoint() -> AsyncIterator[None]:
    """The MCP session manager of this test's event loop stops with the loop."""
    yield
    await stop_endpoints()


async def mcp_call(token: str, tool: str, arguments: dict[str, Any]) -> Any:
    transport = httpx2.ASGITransport(app=application)
    async with (
        httpx2.AsyncClient(
            transport=transport,
            base_url="http://127.0.0.1",
            headers={"Authorization": f"Token {token}"},
        ) as http,
        streamable_http_client("http://127.0.0.1/mcp/", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await session.call_tool(tool, arguments)


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    """A user, and the chain ``support`` whose model is never asked."""
    make_chain(model=scripted_model("never", responses=()))
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("fresh_chain_cache", "stopped_endpoint")
@override_settings(ADVISORS={"MCP_ENDPOINT_ENABLED": True})
async def test_a_refused_turn_reads_the_same_on_every_transport(alice: Any) -> None:
    blank = {"message": "   "}

    def over_rest(endpoint: str) -> Any:
        return client_for(alice).post(f"/api/chains/support/{endpoint}/", blank, format="json")

    called = await sync_to_async(over_rest)("call")
    streamed = await sync_to_async(over_rest)("stream")
    socket = await open_socket(alice)
    try:
        await socket.send_json_to({"type": "message", **blank})
        [frame] = await frames_until_end(socket)
    finally:
        await socket.disconnect()
    tool = await mcp_call(await sync_to_async(token_of)(alice), "ask_support", blank)

    said = (frame["code"], frame["message"], frame["errors"])
    assert said[0] == "invalid" and "message" in said[2]
    for response in (called, streamed):  # the stream is refused before it opens: plain JSON
        error = response.json()["error"]
        assert response.status_code == 400
        assert (error["code"], error["message"], error["fields"]) == said
    assert tool.is_error
    content = tool.structured_content
    assert (content["code"], content["message"], content["errors"]) == said
    assert tool.content[0].text.startswith(frame["message"])
