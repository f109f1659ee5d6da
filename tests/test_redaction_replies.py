"""Issue 36 ("Smaller"): a provider that echoes the API key in a *successful* reply shows it to
no one and stores it nowhere.

The chain's model is an OpenAI-compatible server on loopback whose answer quotes the key the
request carried (read from an environment variable the model config names: no pattern knows its
shape). Over call, SSE and the websocket, the reply the user gets, the ``done`` frame and the
stored message say ``[REDACTED]`` — in a stream too, where the key arrives split across chunks
of every size. The filter itself (:mod:`advisors_app.core.providers.echoed_secrets`) is tested
at every split point.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from advisors_app.core.aggregation import merge_tool_call_deltas
from advisors_app.core.messages import ToolCall
from advisors_app.core.prompt import Prompt
from advisors_app.core.providers.echoed_secrets import MARKER, SecretFilter, reply_filter
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.models import ChatMessage, ChatModelConfig
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.core.providers.openai_server import Completion, ScriptedOpenAiServer
from tests.factories import make_chain
from tests.test_consumers import frames_until_end, open_socket, text_of

KEY_VARIABLE = "LOOPBACK_ECHO_ACCESS"  # a name that says nothing: only the config makes it secret


@pytest.fixture(autouse=True)
def names_allowed(settings: Any) -> None:
    """These variables' names say nothing, so the deployment lists them (docs/models.md)."""
    advisors = getattr(settings, "ADVISORS", {})
    settings.ADVISORS = {**advisors, "PROVIDER_KEY_ENVS": [KEY_VARIABLE]}


KEY = "echo-7c1d9e2f4a6b8c0d1e3f"


def echo(key: str = KEY) -> str:
    return f"Sure. Your key {key} has 3 requests left; {key[:6]} is just its start."


def expected(key: str = KEY) -> str:
    return f"Sure. Your key {MARKER} has 3 requests left; {key[:6]} is just its start."


def streamed(secrets: SecretFilter, pieces: list[str]) -> tuple[str, list[str]]:
    stream = secrets.stream()
    sent = [stream.feed(piece) for piece in pieces]
    sent.append(stream.flush())
    return "".join(sent), sent


def test_a_key_split_anywhere_across_chunks_is_redacted() -> None:
    secrets = SecretFilter([KEY, "another-secret-value"])
    text = echo()
    for size in range(1, len(text) + 1):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        whole, _ = streamed(secrets, pieces)
        assert whole == expected(), size
    for cut in range(len(text)):
        assert streamed(secrets, [text[:cut], text[cut:]])[0] == expected()
    assert secrets.text(text) == expected()


def test_only_what_may_start_a_secret_is_held_back() -> None:
    secrets = SecretFilter([KEY])
    whole, sent = streamed(secrets, ["No secret ", "here at all ", "e", "ch", "oes", " done"])
    # "e", "ech" may start the key; "echoes" does not; a trailing "e" waits for the end.
    assert sent == ["No secret ", "here at all ", "", "", "echoes", " don", "e"]
    assert whole == "No secret here at all echoes done"
    # A secret that begins a longer one: the longer is replaced whole, the shorter alone too.
    nested = SecretFilter(["abcdefgh", "abcdefgh-and-more"])
    assert streamed(nested, ["x abcdefgh", "-and-more y"])[0] == f"x {MARKER} y"
    assert streamed(nested, ["x abcdefgh", " y"])[0] == f"x {MARKER} y"
    assert streamed(nested, ["x abcdefgh"])[0] == f"x {MARKER}"
    # Short values are no keys; no secrets at all holds nothing back.
    assert SecretFilter(["short"]).text("a short text") == "a short text"
    assert streamed(SecretFilter(()), ["a", "b"])[1] == ["a", "b", ""]


def test_the_reply_filter_knows_the_process_secrets_and_the_models_key(settings: Any) -> None:
    assert reply_filter(KEY).text(echo()) == expected()
    # The Django app declared its configured secrets (redaction.secret_values): SECRET_KEY too.
    assert reply_filter(None).text(f"key: {settings.SECRET_KEY}") == f"key: {MARKER}"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAiServer]:
    monkeypatch.setenv(KEY_VARIABLE, KEY)
    server = ScriptedOpenAiServer()
    yield server
    server.stop()


@pytest.fixture
def chain(server: ScriptedOpenAiServer, transactional_db: Any) -> str:
    model = ChatModelConfig.objects.create(
        slug="echoing",
        provider="openai",
        model="scripted-model",
        base_url=server.base_url,
        api_key_env=KEY_VARIABLE,
        max_retries=0,
    )
    make_chain("echoing", model=model)
    return "echoing"


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def stored_replies() -> list[str]:
    return list(ChatMessage.objects.filter(message_type="assistant").values_list("text", flat=True))


def test_call_redacts_an_echoed_key(chain: str, server: ScriptedOpenAiServer, alice: Any) -> None:
    server.add(Completion(echo()))
    response = client_for(alice).post(
        f"/api/chains/{chain}/call/", {"message": "hi"}, format="json"
    )
    assert response.status_code == 200
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    assert response.json()["content"] == expected()
    assert KEY not in response.content.decode()
    assert stored_replies() == [expected()]


@pytest.mark.parametrize("chunk_size", [1, 3, 7])
def test_sse_redacts_a_key_split_across_chunks(
    chain: str, server: ScriptedOpenAiServer, alice: Any, chunk_size: int
) -> None:
    server.add(Completion(echo(), chunk_size=chunk_size))
    body = read_stream(
        client_for(alice).post(f"/api/chains/{chain}/stream/", {"message": "hi"}, format="json")
    )
    events = parse_sse(body)
    deltas = "".join(data["text"] for kind, data in events if kind == "delta")
    assert deltas == expected()
    assert events[-1][0] == "done" and events[-1][1]["content"] == expected()
    assert KEY not in body
    assert stored_replies() == [expected()]


async def test_the_websocket_redacts_an_echoed_key(
    chain: str, server: ScriptedOpenAiServer, alice: Any
) -> None:
    server.add(Completion(echo(), chunk_size=5))
    socket = await open_socket(alice, slug=chain)
    await socket.send_json_to({"type": "message", "message": "hi"})
    frames = await frames_until_end(socket)
    await socket.disconnect()
    assert text_of(frames) == expected() and frames[-1]["content"] == expected()
    assert all(KEY not in str(frame) for frame in frames)


def test_tool_call_arguments_echoing_the_key_are_redacted_in_call_and_stream(
    server: ScriptedOpenAiServer,
) -> None:
    arguments = json.dumps({"note": f"key={KEY}", "n": 1})
    call = {"id": "c1", "function": {"name": "remember", "arguments": arguments}}
    model = OpenAiCompatibleChatModel(
        model="scripted-model", base_url=server.base_url, api_key_env=KEY_VARIABLE, max_retries=0
    )
    server.add(Completion("", tool_calls=[call], finish_reason="tool_calls"))
    server.add(Completion("", tool_calls=[call], finish_reason="tool_calls", chunk_size=3))

    async def run() -> tuple[str, str]:
        called = await model.call(Prompt("hi"))
        calls: list[ToolCall] = []
        async for chunk in model.stream(Prompt("hi")):
            for generation in chunk.results:
                merge_tool_call_deltas(calls, generation.output.tool_calls)
        return called.result.output.tool_calls[0].arguments, calls[0].arguments

    redacted = json.dumps({"note": f"key={MARKER}", "n": 1})
    assert async_to_sync(run)() == (redacted, redacted)
