"""Reasoning parts (issue 43): an OpenAI-compatible server on loopback sends
``reasoning_content`` beside the answer, in a JSON answer and in stream deltas. The reasoning is
the assistant message's ``reasoning``, never its text: not in ``content``, not in memory; a
stream sends it as ``reasoning`` events (service, SSE, websocket)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core import AssistantMessage, Prompt
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleChatModel
from advisors_app.models import ChatMessage, ChatModelConfig
from advisors_app.turn import call_turn, stream_turn
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.core.providers.openai_server import Completion, ScriptedOpenAiServer
from tests.factories import make_chain
from tests.test_consumers import frames_until_end, open_socket

REASONING = "The user greets me; a short greeting back fits."
ANSWER = "Hello there!"


@pytest.fixture
def server() -> Iterator[ScriptedOpenAiServer]:
    server = ScriptedOpenAiServer()
    yield server
    server.stop()


def reply() -> Completion:
    return Completion(text=ANSWER, reasoning=REASONING, chunk_size=8)


async def test_the_provider_keeps_reasoning_apart_in_call_and_stream(
    server: ScriptedOpenAiServer,
) -> None:
    model = OpenAiCompatibleChatModel(model="scripted-model", base_url=server.base_url)
    server.add(reply(), reply())
    called = (await model.call(Prompt("hi"))).result.output
    assert (called.text, called.reasoning) == (ANSWER, REASONING)
    chunks = [chunk async for chunk in model.stream(Prompt("hi"))]
    outputs = [c.result.output for c in chunks if c.result is not None]
    assert "".join(o.reasoning for o in outputs) == REASONING
    assert "".join(o.text for o in outputs) == ANSWER
    # Apart from the message's identity and its stored form.
    assert called == AssistantMessage(ANSWER) and "reasoning" not in str(called.to_dict())


@pytest.fixture
def chain(server: ScriptedOpenAiServer, fresh_chain_cache: Any) -> str:
    model = ChatModelConfig.objects.create(
        slug="thinker", provider="openai", model="scripted-model", base_url=server.base_url
    )
    make_chain("thinking", model=model, advisors=(("message_chat_memory", {}),))
    return "thinking"


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


def stored(conversation_id: str, user: Any) -> list[tuple[str, str]]:
    rows = ChatMessage.objects.filter(
        conversation__conversation_id=f"{user.pk}:{conversation_id}"
    ).order_by("sequence")
    assert not any(REASONING in str(r.metadata) for r in rows)
    return [(r.message_type, r.text) for r in rows]


@pytest.mark.django_db(transaction=True)
async def test_a_call_answers_without_the_reasoning(
    chain: str, server: ScriptedOpenAiServer, alice: Any
) -> None:
    server.add(reply())
    outcome = await call_turn(chain, alice, "hi")
    assert outcome.content == ANSWER and REASONING not in str(outcome.to_dict())
    rows = await sync_to_async(stored)(outcome.conversation_id, alice)
    assert rows == [("user", "hi"), ("assistant", ANSWER)]


def check(payloads: list[dict[str, Any]]) -> None:
    kinds = [p["type"] for p in payloads]
    reasoning = [p["text"] for p in payloads if p["type"] == "reasoning"]
    deltas = [p["text"] for p in payloads if p["type"] == "delta"]
    assert "".join(reasoning) == REASONING and "".join(deltas) == ANSWER
    assert kinds.index("reasoning") < kinds.index("delta")  # the model reasoned first
    assert payloads[-1]["type"] == "done" and payloads[-1]["content"] == ANSWER


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("transport", ["service", "sse", "websocket"])
async def test_a_stream_sends_reasoning_events_apart_from_the_answer(
    chain: str, server: ScriptedOpenAiServer, alice: Any, transport: str
) -> None:
    server.add(reply())
    if transport == "service":
        payloads = [e.to_dict() async for e in await stream_turn(chain, alice, "hi")]
    elif transport == "sse":

        def post() -> list[dict[str, Any]]:
            api = client_for(alice)
            response = api.post(f"/api/chains/{chain}/stream/", {"message": "hi"}, format="json")
            return [data for _, data in parse_sse(read_stream(response))]

        payloads = await sync_to_async(post)()
    else:
        communicator = await open_socket(alice, chain)
        try:
            await communicator.send_json_to({"type": "message", "message": "hi"})
            payloads = await frames_until_end(communicator)
        finally:
            await communicator.disconnect()
    check(payloads)
    rows = await sync_to_async(stored)(payloads[-1]["conversation_id"], alice)
    assert rows == [("user", "hi"), ("assistant", ANSWER)]


@pytest.fixture
def tool_chain(server: ScriptedOpenAiServer, fresh_chain_cache: Any) -> str:
    model = ChatModelConfig.objects.create(
        slug="tool-thinker", provider="openai", model="scripted-model", base_url=server.base_url
    )
    make_chain(
        "tool-thinking",
        model=model,
        advisors=(("message_chat_memory", {}), ("tool_calling", {})),
        tools=["calculator"],
    )
    return "tool-thinking"


@pytest.mark.django_db(transaction=True)
async def test_a_tool_round_s_reasoning_is_streamed_before_its_call(
    tool_chain: str, server: ScriptedOpenAiServer, alice: Any
) -> None:
    """The tool loop holds a round back (and drops a tool round's chunks): reasoning is sent as
    the model streams it, once, in both rounds."""
    call = {
        "id": "call_1",
        "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
    }
    server.add(
        Completion(
            reasoning="I need the calculator.", tool_calls=[call], finish_reason="tool_calls"
        ),
        Completion(text="It is 42.", reasoning="It said 42."),
    )
    payloads = [e.to_dict() async for e in await stream_turn(tool_chain, alice, "6*7?")]
    kinds = [p["type"] for p in payloads]
    reasoning = "".join(p["text"] for p in payloads if p["type"] == "reasoning")
    assert reasoning == "I need the calculator.It said 42."
    assert kinds.index("reasoning") < kinds.index("tool_call_delta") < kinds.index("tool_call")
    assert payloads[-1]["content"] == "It is 42."
    rows = await sync_to_async(stored)(payloads[-1]["conversation_id"], alice)
    assert rows[-1] == ("assistant", "It is 42.")
