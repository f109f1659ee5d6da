"""Issue 18 §2: a provider's error that quotes the API key reaches no one.

The chain's model is an OpenAI-compatible server on loopback answering ``401 {"error":
{"message": "Incorrect API key provided: <key>"}}``, with the real key read from an environment
variable the model config names. The key must not appear in the REST 502 body, the SSE
``error`` event, the websocket ``error`` frame, the stored call log (error message and trace),
the admin's call-log pages, nor any log line. Two keys: one shaped like OpenAI's (``sk-…``) and
one no pattern knows, found only because the configuration names its variable.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from advisors_app.models import AdvisorChain, CallLog, ChatModelConfig
from advisors_app.security.redaction import MARKER
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.core.providers.openai_server import JsonReply, ScriptedOpenAiServer
from tests.factories import make_chain
from tests.test_consumers import frames_until_end, open_socket

pytestmark = pytest.mark.django_db(transaction=True)

KEY_VARIABLE = "LOOPBACK_LLM_ACCESS"  # a name that says nothing: only the config makes it secret


@pytest.fixture(autouse=True)
def names_allowed(settings: Any) -> None:
    """These variables' names say nothing, so the deployment lists them (docs/models.md)."""
    advisors = getattr(settings, "ADVISORS", {})
    settings.ADVISORS = {**advisors, "PROVIDER_KEY_ENVS": [KEY_VARIABLE]}


@pytest.fixture(
    params=["sk-loopback-0123456789abcdefABCDEF", "loopback-9f8e7d6c5b4a39281706"],
    ids=["sk-shaped", "unshaped"],
)
def key(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_VARIABLE, request.param)
    return str(request.param)


@pytest.fixture
def server(key: str) -> Iterator[ScriptedOpenAiServer]:
    server = ScriptedOpenAiServer()
    yield server
    server.stop()


def refuse_key(server: ScriptedOpenAiServer, key: str) -> None:
    """The next request is answered as OpenAI answers a wrong key, quoting it whole."""
    message = f"Incorrect API key provided: {key}. You can find your API key in your account."
    error = {"message": message, "type": "invalid_request_error", "code": "invalid_api_key"}
    server.add(JsonReply({"error": error}, status=401))


@pytest.fixture
def chain(server: ScriptedOpenAiServer, django_user_model: Any) -> str:
    model = ChatModelConfig.objects.create(
        slug="loopback",
        provider="openai",
        model="scripted-model",
        base_url=server.base_url,
        api_key_env=KEY_VARIABLE,
        max_retries=0,
    )
    # simple_logger logs a failed stream's error at DEBUG: a real log line quoting the key.
    make_chain("keyed", model=model, advisors=(("simple_logger", {}),))
    return "keyed"


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)
    return caplog


def assert_no_key(key: str, logs: pytest.LogCaptureFixture, *texts: str) -> None:
    for text in texts:
        assert key not in text
    assert key not in logs.text
    assert all(key not in record.getMessage() for record in logs.records)


def test_the_rest_502_body_has_no_key(
    chain: str, server: ScriptedOpenAiServer, key: str, alice: Any, logs: Any
) -> None:
    refuse_key(server, key)
    response = client_for(alice).post(
        f"/api/chains/{chain}/call/", {"message": "hi"}, format="json"
    )
    assert response.status_code == 502
    error = response.json()["error"]
    assert (error["code"], error["provider_status"]) == ("provider_authentication", 401)
    assert error["message"].startswith(f"Incorrect API key provided: {MARKER}.")
    assert server.requests[0].headers["authorization"] == f"Bearer {key}"  # the key was used
    assert_no_key(key, logs, response.content.decode())


def test_the_sse_error_event_has_no_key(
    chain: str, server: ScriptedOpenAiServer, key: str, alice: Any, logs: Any
) -> None:
    refuse_key(server, key)
    response = client_for(alice).post(
        f"/api/chains/{chain}/stream/", {"message": "hi"}, format="json"
    )
    body = read_stream(response)
    kind, error = parse_sse(body)[-1]
    assert (kind, error["code"]) == ("error", "provider_authentication")
    assert MARKER in error["message"]
    assert f"response: <error AuthenticationError: [401] Incorrect API key provided: {MARKER}" in (
        logs.text
    )
    assert_no_key(key, logs, body)


@pytest.mark.parametrize(
    ("protocol", "body", "marker"),
    [
        (
            "ag-ui",
            {
                "threadId": "t",
                "runId": "r",
                "messages": [{"id": "u", "role": "user", "content": "hi"}],
            },
            '"type":"RUN_ERROR"',
        ),
        (
            "ai-sdk",
            {
                "id": "c",
                "messages": [
                    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}
                ],
            },
            '"type":"error"',
        ),
    ],
)
def test_the_protocol_streams_error_events_have_no_key(
    chain: str,
    server: ScriptedOpenAiServer,
    key: str,
    alice: Any,
    logs: Any,
    protocol: str,
    body: dict[str, Any],
    marker: str,
) -> None:
    refuse_key(server, key)
    response = client_for(alice).post(f"/api/chains/{chain}/{protocol}/", body, format="json")
    text = read_stream(response)
    assert marker in text and MARKER in text
    assert_no_key(key, logs, text)


async def test_the_websocket_error_frame_has_no_key(
    chain: str, server: ScriptedOpenAiServer, key: str, alice: Any, logs: Any
) -> None:
    refuse_key(server, key)
    socket = await open_socket(alice, chain)
    try:
        await socket.send_json_to({"type": "message", "text": "hi"})
        frames = await frames_until_end(socket)
    finally:
        await socket.disconnect()
    assert (frames[-1]["type"], frames[-1]["code"]) == ("error", "provider_authentication")
    assert MARKER in frames[-1]["message"]
    assert_no_key(key, logs, json.dumps(frames))


def test_the_admin_call_log_pages_show_no_key(
    chain: str, server: ScriptedOpenAiServer, key: str, alice: Any, admin_client: Client
) -> None:
    refuse_key(server, key)
    client_for(alice).post(f"/api/chains/{chain}/call/", {"message": "hi"}, format="json")
    log = CallLog.objects.get()
    listing = admin_client.get("/admin/advisors_app/calllog/")
    page = admin_client.get(f"/admin/advisors_app/calllog/{log.pk}/change/")
    assert page.status_code == 200
    assert f"Incorrect API key provided: {MARKER}" in page.content.decode()
    assert key not in listing.content.decode()
    assert key not in page.content.decode()


def test_the_stored_call_log_has_no_key(
    chain: str, server: ScriptedOpenAiServer, key: str, alice: Any, admin_client: Client
) -> None:
    refuse_key(server, key)
    client_for(alice).post(f"/api/chains/{chain}/call/", {"message": "hi"}, format="json")
    log = CallLog.objects.get()
    assert log.error_type == "AuthenticationError"
    assert f"Incorrect API key provided: {MARKER}" in log.error_message
    assert key not in log.error_message
    assert key not in json.dumps(log.trace)
    # The chat page's trace view (staff) shows the stored row as it is.
    trace = admin_client.get(f"/chat/traces/{log.trace_id}/")
    assert trace.status_code == 200
    assert key not in trace.content.decode()


def test_the_admin_playground_shows_no_key(
    chain: str, server: ScriptedOpenAiServer, key: str, admin_client: Client
) -> None:
    refuse_key(server, key)
    chain_row = AdvisorChain.objects.get(slug=chain)
    url = f"/admin/advisors_app/advisorchain/{chain_row.pk}/playground/"
    page = admin_client.post(url, {"message": "hello"})
    assert page.status_code == 200
    assert f"Incorrect API key provided: {MARKER}" in page.content.decode()
    assert key not in page.content.decode()


@pytest.mark.parametrize(
    "base_url",
    ["http://user:secret@127.0.0.1:9/v1", "http://127.0.0.1:9/v1?api_key=secret"],
)
def test_a_model_url_holding_credentials_is_refused(base_url: str) -> None:
    model = ChatModelConfig(slug="leaky", provider="openai", model="m", base_url=base_url)
    with pytest.raises(ValidationError) as refused:
        model.full_clean()
    assert "base_url" in refused.value.message_dict
