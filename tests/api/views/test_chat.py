"""``call`` and ``stream`` through DRF's test client: answers, refusals, provider failures."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings
from rest_framework.test import APIClient

from advisors_app.core import (
    AssistantMessage,
    ChatGenerationMetadata,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    ProviderError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitedError,
    ScriptedChatModel,
    Usage,
)
from advisors_app.definition import publish
from advisors_app.definition.runtime import load_chain
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import CallLog, ChatMessage, Collection, Conversation
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model
from tests.helpers import without_outcome

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def chain() -> Any:
    """A chain on a scripted model with an empty script: each test adds its answers."""
    return make_chain(
        model=scripted_model("script", responses=(), repeat=False),
        advisors=(("append", {"text": "!"}),),
    )


def script(slug: str, *items: Any) -> ScriptedChatModel:
    """The cached chain's scripted model, with ``items`` appended to its script."""
    model: ScriptedChatModel = load_chain(slug).client.chat_model  # type: ignore[assignment]
    model.add(*items)
    return model


def transcript(user: Any, conversation_id: str) -> list[tuple[str, str, dict]]:
    rows = ChatMessage.objects.filter(
        conversation__conversation_id=f"{user.pk}:{conversation_id}"
    ).order_by("sequence")
    return [(r.message_type, r.text, without_outcome(r.metadata)) for r in rows]


def read_stream(response: Any) -> str:
    """The whole body of a streaming response whose content is an async iterator."""

    async def read() -> bytes:
        return b"".join([part async for part in response.streaming_content])

    return async_to_sync(read)().decode()


def parse_sse(body: str) -> list[tuple[str, dict[str, Any]]]:
    """``[(event type, data)]`` of a Server-Sent Events body; comment lines are skipped."""
    events = []
    for block in body.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        data = json.loads(fields["data"])
        assert fields.get("id") == data.get("event_id")  # the SSE id line is the frame's id
        events.append((fields["event"], data))
    return events


def test_call_answers_with_the_reply_and_stores_the_turn(chain: Any, alice: Any, api: Any) -> None:
    model = script(chain.slug, "Hi Alice.", "Again.")
    response = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hello"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body == {
        "conversation_id": body["conversation_id"],
        "message_id": body["message_id"],
        "stored": True,
        "content": "Hi Alice.",
        "usage": None,
        "metadata": {},
        "finish_reason": "STOP",
        "finish_category": "stop",
        "trace_id": body["trace_id"],
        "version": 1,
        "sources": [],
        "tools": [],
        "timings": {"latency_ms": body["timings"]["latency_ms"], "time_to_first_token_ms": None},
        "pending_approvals": [],
        "cost": {
            "input": "0",
            "output": "0",
            "total": "0",
            "currency": "",
            "price_source": "free",
        },
        "budget_warnings": [],
        "guard": [],
    }
    assert len(body["conversation_id"]) == 32
    assert model.prompts[-1].user_message.text == "hello!"
    assert transcript(alice, body["conversation_id"]) == [
        ("user", "hello", {}),
        ("assistant", "Hi Alice.", {"trace_id": body["trace_id"]}),
    ]
    reply = ChatMessage.objects.get(pk=body["message_id"])
    assert (reply.message_type, reply.text) == ("assistant", "Hi Alice.")
    log = CallLog.objects.get(trace_id=body["trace_id"])
    assert (log.status, log.mode, log.user_id) == ("ok", "call", alice.pk)

    again = api.post(
        f"/api/chains/{chain.slug}/call/",
        {"message": "more", "conversation_id": body["conversation_id"]},
        format="json",
    )
    assert again.json()["conversation_id"] == body["conversation_id"]
    assert again.json()["message_id"] > body["message_id"]
    assert [t for _, t, _ in transcript(alice, body["conversation_id"])] == [
        "hello",
        "Hi Alice.",
        "more",
        "Again.",
    ]


def test_call_returns_usage_and_metadata(chain: Any, api: Any) -> None:
    reply = ChatResponse(
        (Generation(AssistantMessage("Done."), ChatGenerationMetadata("STOP")),),
        ChatResponseMetadata(model="m1", usage=Usage(7, 2), extra={"citations": [{"id": "d1"}]}),
    )
    script(chain.slug, reply)
    body = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hi"}, format="json").json()
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    assert body["metadata"] == {"citations": [{"id": "d1"}]}


def test_a_client_chosen_id_is_namespaced_to_its_owner(
    chain: Any, alice: Any, bob: Any, api: Any
) -> None:
    script(chain.slug, "for alice", "for bob")
    url = f"/api/chains/{chain.slug}/call/"
    assert (
        api.post(url, {"message": "a", "conversation_id": "trip"}, format="json").status_code == 200
    )
    theirs = client_for(bob).post(url, {"message": "b", "conversation_id": "trip"}, format="json")
    assert theirs.json()["conversation_id"] == "trip"
    assert [t for _, t, _ in transcript(alice, "trip")] == ["a", "for alice"]
    assert [t for _, t, _ in transcript(bob, "trip")] == ["b", "for bob"]


@pytest.fixture
def rag_chain(alice: Any) -> Any:
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.", metadata={"year": 2024})
    return make_chain(
        "rag",
        model=scripted_model("rag-model", responses=("ok",)),
        advisors=(("question_answer", {"collection": "kb", "allow_request_filter": True}),),
    )


@pytest.mark.parametrize(
    ("body", "status", "code", "fields"),
    [
        ({"message": "   "}, 400, "invalid", {"message": ["This field may not be blank."]}),
        ({"message": 5}, 400, "invalid", {"message": ["Not a valid string."]}),
        ({}, 400, "invalid", {"message": ["This field is required."]}),
        (
            {"message": "x" * 11},
            400,
            "invalid",
            {"message": ["Ensure this field has no more than 10 characters (it has 11)."]},
        ),
        (
            {"message": "hi", "conversation_id": "../x"},
            400,
            "invalid",
            {
                "conversation_id": [
                    "Use at most 128 letters, digits and ._:- (starting with a letter or digit)."
                ]
            },
        ),
        (
            {"message": "hi", "params": {"options": {"temperature": 9}}},
            400,
            "invalid",
            {"params.options.temperature": ["9 is greater than the maximum of 2"]},
        ),
        (
            {"message": "hi", "params": {"qa_filter_expression": "year >= "}},
            400,
            "invalid",
            {
                "params.qa_filter_expression": [
                    "Invalid filter expression at line 1, column 9: unexpected end of "
                    "expression in 'year >= '"
                ]
            },
        ),
        (
            {"message": "hi", "mesage": "typo"},
            400,
            "invalid",
            {
                "mesage": [
                    "Unknown field. Known fields: message, decisions, conversation_id, params, "
                    "label, version."
                ]
            },
        ),
        (["hi"], 400, "invalid", {"non_field_errors": ["Send a JSON object."]}),
        (
            {"message": "hi", "params": {"options": {"stop": ["\x00"]}}},
            400,
            "invalid",
            {"params.options.stop.0": ["Null characters are not allowed."]},
        ),
        ({"message": "hi\x00"}, 400, "invalid", {"message": ["Null characters are not allowed."]}),
        (
            {"message": "hi", "params": {"options": {"max_tokens": 10**20}}},
            400,
            "invalid",
            {
                "params.options.max_tokens": [
                    "100000000000000000000 is greater than the maximum of 1000000"
                ]
            },
        ),
    ],
)
@pytest.mark.parametrize("mode", ["call", "stream"])
@override_settings(ADVISORS={"MAX_MESSAGE_CHARS": 10})
def test_refused_input_is_a_4xx_json_error_and_stores_nothing(
    rag_chain: Any, api: Any, mode: str, body: Any, status: int, code: str, fields: dict
) -> None:
    response = api.post(
        f"/api/chains/{rag_chain.slug}/{mode}/",
        body,
        format="json",
        HTTP_ACCEPT="text/event-stream" if mode == "stream" else "application/json",
    )
    assert response.status_code == status
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert (error["code"], error["fields"]) == (code, fields)
    assert error["message"] == "The request is invalid."
    assert not Conversation.objects.exists()
    assert not CallLog.objects.exists()


@pytest.mark.parametrize("mode", ["call", "stream"])
def test_bodies_that_cannot_be_read_or_stored_are_4xx_json_errors(
    chain: Any, api: Any, mode: str
) -> None:
    url = f"/api/chains/{chain.slug}/{mode}/"
    surrogate = api.post(url, '{"message": "hi \\ud800"}', content_type="application/json")
    assert surrogate.status_code == 400
    assert surrogate.json()["error"]["fields"] == {
        "message": ["Unpaired surrogate characters are not allowed."]
    }
    # The refused key is quoted escaped: the error itself must be encodable.
    key = api.post(
        url, '{"message": "hi", "params": {"\\ud800": 1}}', content_type="application/json"
    )
    assert key.status_code == 400
    assert key.json()["error"]["fields"] == {
        "params.\\ud800": [
            "Unpaired surrogate characters are not allowed.",
            "Unknown field. Known fields: append_flag, options.",
        ]
    }
    nested = '{"message": "hi", "params": ' + "[" * 100_000 + "]" * 100_000 + "}"
    deep = api.post(url, nested, content_type="application/json")
    assert deep.status_code == 400
    assert deep.json()["error"]["message"] == "The JSON is nested too deeply to read."
    huge = api.post(url, '{"message": "' + "x" * 3_000_000 + '"}', content_type="application/json")
    assert huge.status_code == 413
    assert huge.json()["error"]["code"] == "too_large"
    assert not Conversation.objects.exists()
    assert not CallLog.objects.exists()


@pytest.mark.parametrize("mode", ["call", "stream"])
def test_malformed_json_unknown_chains_and_anonymous_callers_are_refused(
    chain: Any, api: Any, mode: str
) -> None:
    url = f"/api/chains/{chain.slug}/{mode}/"
    broken = api.post(url, '{"message": "hi"', content_type="application/json")
    assert broken.status_code == 400
    error = broken.json()["error"]
    assert error["code"] == "parse_error"
    assert "line 1 column 17" in error["message"]

    missing = api.post(f"/api/chains/nope/{mode}/", {"message": "hi"}, format="json")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "chain_not_found"
    assert missing.json()["error"]["fields"] == {"chain": ["No enabled chain 'nope'."]}

    anonymous = client_for(None).post(url, {"message": "hi"}, format="json")
    assert anonymous.status_code == 401
    assert anonymous["WWW-Authenticate"] == "Token"
    assert anonymous.json()["error"]["code"] == "not_authenticated"

    wrong_token = client_for(None)
    wrong_token.credentials(HTTP_AUTHORIZATION="Token nope")
    assert wrong_token.post(url, {"message": "hi"}, format="json").status_code == 401
    assert api.get(url).status_code == 405
    assert not Conversation.objects.exists()
    assert not CallLog.objects.exists()


@pytest.mark.parametrize(
    ("failure", "status", "code", "retry_after"),
    [
        (RateLimitedError("slow down", retry_after=2.5), 429, "rate_limited", "3"),
        (ProviderUnavailableError("upstream down", status=503), 503, "provider_unavailable", None),
        (ProviderTimeoutError("no answer in 30 s"), 504, "provider_timeout", None),
        (ProviderError("teapot", status=418), 502, "provider_error", None),
    ],
)
def test_provider_failures_keep_their_status_and_message(
    chain: Any, api: Any, failure: Exception, status: int, code: str, retry_after: str | None
) -> None:
    script(chain.slug, failure)
    response = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hi"}, format="json")
    assert response.status_code == status
    assert response.get("Retry-After") == retry_after
    error = response.json()["error"]
    assert error["code"] == code
    assert error["message"] == failure.message  # type: ignore[attr-defined]
    assert error["provider_status"] == failure.status  # type: ignore[attr-defined]
    assert CallLog.objects.get().status == "error"


def test_an_unexpected_failure_is_a_500_that_reveals_nothing(chain: Any, api: Any) -> None:
    script(chain.slug, RuntimeError("database password is hunter2"))
    response = api.post(f"/api/chains/{chain.slug}/call/", {"message": "hi"}, format="json")
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["code"] == "internal_error"
    assert "hunter2" not in response.content.decode()


@override_settings(ADVISORS={"STREAM_COALESCE_MS": 0})  # every chunk its own event
def test_stream_sends_start_deltas_and_done_as_server_sent_events(
    chain: Any, alice: Any, api: Any
) -> None:
    last = ChatResponse(
        (Generation(AssistantMessage("!"), ChatGenerationMetadata("STOP")),),
        ChatResponseMetadata(usage=Usage(5, 3)),
    )
    script(chain.slug, ["Hel", "lo", last])
    response = api.post(f"/api/chains/{chain.slug}/stream/", {"message": "hi"}, format="json")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream; charset=utf-8"
    assert response["Cache-Control"] == "no-cache"
    assert response["X-Accel-Buffering"] == "no"
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "delta", "delta", "delta", "done"]
    assert all(kind == data["type"] for kind, data in events)
    start, done = events[0][1], events[-1][1]
    assert start["chain"] == chain.slug
    assert [data["text"] for _, data in events[1:4]] == ["Hel", "lo", "!"]
    assert [data["event_id"] for _, data in events] == [
        f"{start['trace_id']}-{n}" for n in range(1, 6)
    ]
    assert done == {
        "event_id": done["event_id"],
        "type": "done",
        "reason": "complete",
        "conversation_id": start["conversation_id"],
        "message_id": done["message_id"],
        "stored": True,
        "content": "Hello!",
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        "metadata": {},
        "finish_reason": "STOP",
        "finish_category": "stop",
        "trace_id": start["trace_id"],
        "version": 1,
        "sources": [],
        "tools": [],
        "timings": done["timings"],
        "pending_approvals": [],
        "cost": {
            "input": "0",
            "output": "0",
            "total": "0",
            "currency": "",
            "price_source": "free",
        },
        "budget_warnings": [],
        "guard": [],
    }
    assert 0 < done["timings"]["time_to_first_token_ms"] <= done["timings"]["latency_ms"]
    assert [t for _, t, _ in transcript(alice, start["conversation_id"])] == ["hi", "Hello!"]
    assert ChatMessage.objects.get(pk=done["message_id"]).text == "Hello!"


@override_settings(ADVISORS={"STREAM_COALESCE_MS": 60_000})
def test_stream_deltas_are_coalesced_as_on_the_websocket(chain: Any, alice: Any, api: Any) -> None:
    """The first text goes out at once; text arriving before the next interval is merged and
    sent before the done event."""
    script(chain.slug, ["Hel", "lo", "!"])
    response = api.post(f"/api/chains/{chain.slug}/stream/", {"message": "hi"}, format="json")
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "delta", "delta", "done"]
    assert [data["text"] for kind, data in events if kind == "delta"] == ["Hel", "lo!"]
    assert events[-1][1]["content"] == "Hello!"


@override_settings(ADVISORS={"SSE_KEEPALIVE_SECONDS": 0.05})
def test_a_silent_stream_gets_keep_alive_comments_and_loses_nothing(
    chain: Any, alice: Any, api: Any
) -> None:
    model = script(chain.slug, ["slow ", "answer"])
    model.chunk_delay = 0.3  # a model that thinks longer than the keep-alive interval
    response = api.post(f"/api/chains/{chain.slug}/stream/", {"message": "hi"}, format="json")
    body = read_stream(response)
    assert body.count(": keep-alive\n\n") >= 2
    events = parse_sse(body)
    kinds = [kind for kind, _ in events]
    assert (kinds[0], set(kinds[1:-1]), kinds[-1]) == ("start", {"delta"}, "done")
    assert "".join(data["text"] for _, data in events[1:-1]) == "slow answer"
    assert events[-1][1]["content"] == "slow answer"
    assert [t for _, t, _ in transcript(alice, events[0][1]["conversation_id"])] == [
        "hi",
        "slow answer",
    ]


def test_a_provider_failure_mid_stream_is_an_error_event(chain: Any, alice: Any, api: Any) -> None:
    script(chain.slug, ["partial ", RateLimitedError("slow down", retry_after=2.0)])
    response = api.post(f"/api/chains/{chain.slug}/stream/", {"message": "hi"}, format="json")
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "delta", "error"]
    error = events[-1][1]
    assert (error["code"], error["message"], error["provider_status"], error["retry_after"]) == (
        "rate_limited",
        "slow down",
        429,
        2.0,
    )
    assert transcript(alice, events[0][1]["conversation_id"])[-1] == (
        "assistant",
        "partial ",
        {"interrupted": True, "finish_reason": "error", "trace_id": events[0][1]["trace_id"]},
    )


@pytest.fixture
def guarded(alice: Any) -> Any:
    """A chain with memory behind a guard that refuses "keylogger"."""
    return make_chain(
        "guarded",
        model=scripted_model("guarded-model", responses=("Sure.",)),
        advisors=(("safe_guard", {"words": ["keylogger"]}), ("message_chat_memory", {})),
    )


def test_a_refused_first_call_answers_without_a_conversation(guarded: Any, api: Any) -> None:
    url = f"/api/chains/{guarded.slug}/call/"
    body = api.post(url, {"message": "write a keylogger"}, format="json").json()
    assert body["finish_reason"] == "CONTENT_FILTER"
    assert (body["conversation_id"], body["message_id"], body["stored"]) == (None, None, False)
    assert not Conversation.objects.exists()

    # Refused later in a conversation: the conversation stays, this turn stored nothing.
    first = api.post(url, {"message": "hello"}, format="json").json()
    later = api.post(
        url,
        {"message": "a keylogger?", "conversation_id": first["conversation_id"]},
        format="json",
    ).json()
    assert (later["conversation_id"], later["message_id"], later["stored"]) == (
        first["conversation_id"],
        None,
        False,
    )


def test_a_refused_first_stream_ends_without_a_conversation(guarded: Any, api: Any) -> None:
    response = api.post(
        f"/api/chains/{guarded.slug}/stream/", {"message": "write a keylogger"}, format="json"
    )
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "delta", "done"]
    start, done = events[0][1], events[-1][1]
    assert start["conversation_id"]  # named before the chain ran; removed since
    assert (done["conversation_id"], done["message_id"], done["stored"]) == (None, None, False)
    assert not Conversation.objects.exists()


def test_a_first_stream_failing_before_any_text_names_no_conversation(chain: Any, api: Any) -> None:
    script(chain.slug, [ProviderUnavailableError("down", status=503)])
    response = api.post(f"/api/chains/{chain.slug}/stream/", {"message": "hi"}, format="json")
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "error"]
    assert events[-1][1]["conversation_id"] is None
    assert events[-1][1]["trace_id"] == events[0][1]["trace_id"]
    assert not Conversation.objects.exists()


def test_the_call_answer_is_documented_with_message_id_and_stored(client: Any) -> None:
    openapi = client.get("/api/schema/", {"format": "json"}).json()
    result = openapi["components"]["schemas"]["ChatResult"]
    properties = result["properties"]
    assert {"conversation_id", "message_id", "stored"} <= set(properties)
    assert properties["conversation_id"]["nullable"] is True
    assert (properties["message_id"]["type"], properties["message_id"]["nullable"]) == (
        "integer",
        True,
    )
    assert properties["stored"]["type"] == "boolean"
    assert {"conversation_id", "message_id", "stored"} <= set(result["required"])
    stream = openapi["paths"]["/api/chains/{slug}/stream/"]["post"]
    assert '"message_id", "stored"' in stream["description"]


@pytest.mark.slow
def test_call_on_the_embedded_default_model(api: Any) -> None:
    """A chain without a model runs on the offline SmolLM2 (ADVISORS["DEFAULT_CHAT_MODEL"])."""
    chain = make_chain("embedded", model=None, publish=False)
    chain.chat_model = None
    chain.save()
    publish(chain)
    response = api.post(
        f"/api/chains/{chain.slug}/call/",
        {"message": "Say hello.", "params": {"options": {"max_tokens": 8, "temperature": 0}}},
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["content"].strip()
    assert body["usage"]["completion_tokens"] <= 8


def test_a_browser_session_needs_its_csrf_token(chain: Any, alice: Any) -> None:
    script(chain.slug, "Signed in.")
    browser = APIClient(enforce_csrf_checks=True)
    browser.force_login(alice)
    url = f"/api/chains/{chain.slug}/call/"
    refused = browser.post(url, {"message": "hi"}, format="json")
    assert refused.status_code == 403
    error = refused.json()["error"]
    assert error["code"] == "permission_denied" and "CSRF" in error["message"]
    secret = "s3cr3t" * 5 + "ok"
    browser.cookies["csrftoken"] = secret
    answer = browser.post(url, {"message": "hi"}, format="json", HTTP_X_CSRFTOKEN=secret)
    assert answer.status_code == 200 and answer.json()["content"] == "Signed in."
