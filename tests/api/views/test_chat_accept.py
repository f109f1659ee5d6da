"""The chat endpoints honour ``Accept`` as docs/rest-api.md says (issue 36, "Smaller"): an
``Accept`` that admits nothing the endpoint sends is 406 ``not_acceptable`` before any turn
runs; JSON, the stream's ``text/event-stream``, wildcards and no header at all are served."""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.models import CallLog, Conversation
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chain() -> str:
    make_chain("accepting", model=scripted_model("accepting-model", responses=("Hi!",)))
    return "accepting"


def post(api: Any, url: str, accept: str | None) -> Any:
    headers = {"HTTP_ACCEPT": accept} if accept is not None else {}
    return api.post(url, {"message": "hello"}, format="json", **headers)


@pytest.mark.parametrize("endpoint", ["call", "stream"])
@pytest.mark.parametrize(
    "accept", ["text/html", "application/xml, text/plain", "application/json;q=0"]
)
def test_an_accept_admitting_nothing_sent_is_406(
    chain: str, api: Any, endpoint: str, accept: str
) -> None:
    response = post(api, f"/api/chains/{chain}/{endpoint}/", accept)
    assert response.status_code == 406
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "not_acceptable"
    assert "application/json" in error["message"]
    assert not Conversation.objects.exists() and not CallLog.objects.exists()


@pytest.mark.parametrize(
    "accept", [None, "", "*/*", "application/json", "application/*", "text/html, */*;q=0.1"]
)
def test_call_answers_json_to_what_admits_it(chain: str, api: Any, accept: str | None) -> None:
    response = post(api, f"/api/chains/{chain}/call/", accept)
    assert response.status_code == 200, response.content
    assert response.json()["content"] == "Hi!"


def test_call_refuses_an_event_stream_only_client(chain: str, api: Any) -> None:
    assert post(api, f"/api/chains/{chain}/call/", "text/event-stream").status_code == 406


@pytest.mark.parametrize("accept", ["text/event-stream", "application/json", "text/*", None])
def test_stream_serves_events_to_what_admits_them(chain: str, api: Any, accept: str | None) -> None:
    response = post(api, f"/api/chains/{chain}/stream/", accept)
    assert response.status_code == 200
    events = parse_sse(read_stream(response))
    assert events[-1][0] == "done" and events[-1][1]["content"] == "Hi!"


def test_a_refused_stream_turn_is_still_a_json_error(chain: str, api: Any) -> None:
    response = api.post(
        f"/api/chains/{chain}/stream/",
        {"message": " "},
        format="json",
        HTTP_ACCEPT="text/event-stream",
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid"
