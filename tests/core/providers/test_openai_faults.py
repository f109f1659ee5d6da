"""Provider faults from a real loopback server become typed errors, alike in call and stream.

Bug case B32: the same fault keeps its type, status, message and body whether it happens in a
call, at the start of a stream, or after chunks were already delivered.
"""

from __future__ import annotations

import socket

import pytest

from advisors_app.core import (
    AuthenticationError,
    BadRequestError,
    ChatClient,
    MalformedResponseError,
    ModelFailure,
    Prompt,
    ProviderConnectionError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    RateLimitedError,
    RecordingAdvisor,
)
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.core.streams import closing_stream
from tests.core.providers.openai_server import (
    Completion,
    Hang,
    JsonReply,
    ScriptedOpenAiServer,
    SseReply,
    chunk,
)

MESSAGE = "messages.0: unknown field 'foo'"
MODES = ["call", "stream"]


def model_on(server: ScriptedOpenAiServer, **kwargs) -> OpenAiCompatibleChatModel:
    kwargs.setdefault("max_retries", 0)
    return OpenAiCompatibleChatModel(model="scripted-model", base_url=server.base_url, **kwargs)


async def run(model: OpenAiCompatibleChatModel, mode: str) -> list[str]:
    """Call or stream to the end; returns the text deltas received before any error."""
    if mode == "call":
        await model.call(Prompt("x"))
        return []
    received: list[str] = []
    async with closing_stream(model.stream(Prompt("x"))) as chunks:
        async for item in chunks:
            if item.generations and item.text:
                received.append(item.text)
    return received


def three_chunks_then(error: dict) -> SseReply:
    return SseReply([chunk("a"), chunk("b"), chunk("c"), {"error": error}], done=False)


@pytest.mark.parametrize("mode", [*MODES, "stream after 3 chunks"])
async def test_b32_a_bad_request_keeps_type_status_message_and_body(
    openai_server: ScriptedOpenAiServer, mode: str
) -> None:
    error = {"message": MESSAGE, "type": "invalid_request_error", "param": None, "code": None}
    if mode == "stream after 3 chunks":
        openai_server.add(three_chunks_then(error))
    else:
        openai_server.add(JsonReply({"error": error}, 400))
    model = model_on(openai_server)
    with pytest.raises(BadRequestError) as raised:
        await run(model, mode.split()[0])
    assert (raised.value.status, raised.value.message) == (400, MESSAGE)
    assert raised.value.body["message"] == MESSAGE
    assert raised.value.provider == "openai"
    assert str(raised.value) == f"[400] {MESSAGE}"


async def test_b32_chunks_before_an_in_stream_error_are_delivered_first(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(three_chunks_then({"message": "overloaded", "type": "server_error"}))
    received: list[str] = []
    with pytest.raises(ProviderUnavailableError, match="overloaded"):
        async with closing_stream(model_on(openai_server).stream(Prompt("x"))) as chunks:
            async for item in chunks:
                if item.generations and item.text:
                    received.append(item.text)
    assert received == ["a", "b", "c"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("headers", "retry_after"),
    [
        ({"Retry-After": "2"}, 2.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({}, None),
    ],
)
async def test_b32_rate_limits_carry_retry_after(
    openai_server: ScriptedOpenAiServer, mode: str, headers: dict, retry_after: float | None
) -> None:
    body = {"error": {"message": "slow down", "type": "rate_limit_exceeded"}}
    openai_server.add(JsonReply(body, 429, headers))
    with pytest.raises(RateLimitedError) as raised:
        await run(model_on(openai_server), mode)
    assert (raised.value.status, raised.value.message) == (429, "slow down")
    assert raised.value.retry_after == retry_after
    assert isinstance(raised.value, ModelFailure)


async def test_b32_a_rate_limit_event_after_chunks_is_a_rate_limit(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(three_chunks_then({"message": "slow down", "type": "rate_limit_exceeded"}))
    with pytest.raises(RateLimitedError, match="slow down") as raised:
        await run(model_on(openai_server), "stream")
    assert raised.value.status == 429 and raised.value.retry_after is None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, BadRequestError),
        (422, BadRequestError),
        (408, ProviderTimeoutError),
        (500, ProviderUnavailableError),
        (503, ProviderUnavailableError),
    ],
)
async def test_status_codes_map_to_types(
    openai_server: ScriptedOpenAiServer, mode: str, status: int, expected: type
) -> None:
    openai_server.add(JsonReply({"error": {"message": f"failed with {status}"}}, status))
    with pytest.raises(expected) as raised:
        await run(model_on(openai_server), mode)
    assert type(raised.value) is expected
    assert (raised.value.status, raised.value.message) == (status, f"failed with {status}")


@pytest.mark.parametrize("mode", MODES)
async def test_a_plain_text_error_body_becomes_the_message(
    openai_server: ScriptedOpenAiServer, mode: str
) -> None:
    openai_server.add(JsonReply("upstream connect error", 502))
    with pytest.raises(ProviderUnavailableError) as raised:
        await run(model_on(openai_server), mode)
    assert (raised.value.status, raised.value.message) == (502, "upstream connect error")


@pytest.mark.parametrize("mode", MODES)
async def test_no_answer_within_the_timeout(openai_server: ScriptedOpenAiServer, mode: str) -> None:
    openai_server.add(Hang(5))
    with pytest.raises(ProviderTimeoutError, match="timeout"):
        await run(model_on(openai_server, timeout=0.3), mode)


async def test_a_stream_that_stalls_times_out(openai_server: ScriptedOpenAiServer) -> None:
    openai_server.add(SseReply([chunk("a"), chunk("b"), 5.0, chunk("c")]))
    model = model_on(openai_server, timeout=0.3)
    with pytest.raises(ProviderTimeoutError):
        await run(model, "stream")


@pytest.mark.parametrize("mode", MODES)
async def test_an_unreachable_server(mode: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    model = OpenAiCompatibleChatModel(
        model="m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0
    )
    with pytest.raises(ProviderConnectionError, match="could not be reached"):
        await run(model, mode)


async def test_a_stream_cut_mid_way(openai_server: ScriptedOpenAiServer) -> None:
    openai_server.add(SseReply([chunk("a"), chunk("b"), chunk("c"), chunk("d")], cut_after=2))
    received: list[str] = []
    with pytest.raises(MalformedResponseError, match="cut"):
        async with closing_stream(model_on(openai_server).stream(Prompt("x"))) as chunks:
            async for item in chunks:
                received.append(item.text)
    assert received == ["a", "b"]


async def test_a_malformed_chunk(openai_server: ScriptedOpenAiServer) -> None:
    openai_server.add(SseReply([chunk("a"), "data: {not json\n\n", chunk(finish_reason="stop")]))
    with pytest.raises(MalformedResponseError, match="not JSON") as raised:
        await run(model_on(openai_server), "stream")
    assert "{not json" in raised.value.body


async def test_a_stream_that_ends_without_a_finish_reason(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(SseReply([chunk("a"), chunk("b")]))
    with pytest.raises(MalformedResponseError, match="no finish reason"):
        await run(model_on(openai_server), "stream")


async def test_an_answer_without_choices(openai_server: ScriptedOpenAiServer) -> None:
    openai_server.add(JsonReply({"id": "x", "object": "chat.completion", "choices": []}))
    with pytest.raises(MalformedResponseError, match="no choices"):
        await run(model_on(openai_server), "call")


@pytest.mark.parametrize("mode", MODES)
async def test_retries_follow_the_model_setting(
    openai_server: ScriptedOpenAiServer, mode: str
) -> None:
    openai_server.add(
        JsonReply({"error": {"message": "busy"}}, 503, {"retry-after-ms": "10"}),
        JsonReply({"error": {"message": "slow"}}, 429, {"retry-after-ms": "10"}),
        Completion("finally"),
    )
    received = await run(model_on(openai_server, max_retries=2), mode)
    assert len(openai_server.requests) == 3
    assert mode == "call" or "".join(received) == "finally"


async def test_a_stream_fails_lazily_and_errors_pass_advisors_unwrapped(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(JsonReply({"error": {"message": MESSAGE}}, 400))
    recorder = RecordingAdvisor("outer")
    client = ChatClient(model_on(openai_server), default_advisors=[recorder])
    stream = client.prompt("x").stream().content()
    assert openai_server.requests == []
    with pytest.raises(BadRequestError, match="unknown field"):
        async with closing_stream(stream) as texts:
            async for _ in texts:
                pass
    assert len(openai_server.requests) == 1
