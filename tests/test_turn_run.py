"""Running a turn: a call's answer and a stream's events, a failing provider, and a turn
stopped early (closed, cancelled) — the model stops at once, the turn is still finished."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from advisors_app.core import (
    AssistantMessage,
    ChatGenerationMetadata,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    ProviderUnavailableError,
    RateLimitedError,
    Usage,
)
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import ChatMessage, Conversation
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import DeltaEvent, DoneEvent, ErrorEvent, StartEvent
from tests.turn_helpers import alogs, atranscript, collect, script, script_chain

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def chain() -> Any:
    return script_chain()


async def test_call_answers_persists_the_turn_and_logs_it(chain: Any, user: Any) -> None:
    model = await script(chain.slug, "Hi Alice.")
    result = await call_turn(chain.slug, user, "hello")
    assert result.content == "Hi Alice."
    assert result.finish_reason == "STOP"
    assert len(result.conversation_id) == 32
    assert model.prompts[-1].user_message.text == "hello!"
    assert result.prompt["messages"] == [
        {"type": "system", "text": "Be brief."},
        {"type": "user", "text": "hello!"},
    ]
    assert [e["name"] for e in result.trace["entries"]] == ["AppendAdvisor", "call"]
    assert result.to_dict() == {
        "conversation_id": result.conversation_id,
        "message_id": result.message_id,
        "stored": True,
        "content": "Hi Alice.",
        "usage": None,
        "metadata": {},
        "finish_reason": "STOP",
        "finish_category": "stop",
        "trace_id": result.trace_id,
        "version": 1,
        "sources": [],
        "tools": [],
        "timings": {"latency_ms": result.timings["latency_ms"], "time_to_first_token_ms": None},
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
    assert 0 < result.timings["latency_ms"] < 60_000
    key = f"{user.pk}:{result.conversation_id}"
    assert await atranscript(key) == [
        ("user", "hello", {}),
        ("assistant", "Hi Alice.", {"trace_id": result.trace_id}),
    ]
    reply = await ChatMessage.objects.aget(pk=result.message_id)
    assert (reply.message_type, reply.text) == ("assistant", "Hi Alice.")
    [log] = await alogs()
    assert log["status"] == "ok" and log["mode"] == "call"
    assert log["chain_slug"] == chain.slug and log["user_id"] == user.pk
    assert log["conversation_id"] == key and log["trace_id"] == result.trace_id
    assert log["latency"] > 0 and log["time_to_first_token"] is None
    assert [e["name"] for e in log["trace"]["entries"]] == ["AppendAdvisor", "call"]


async def test_stream_sends_start_deltas_and_done_then_logs(chain: Any, user: Any) -> None:
    usage_chunk = ChatResponse(
        (Generation(AssistantMessage("!"), ChatGenerationMetadata("STOP")),),
        ChatResponseMetadata(usage=Usage(5, 3)),
    )
    await script(chain.slug, ["Hel", "lo", "", usage_chunk])
    stream = await stream_turn(chain.slug, user, "hi")
    events = await collect(stream)
    assert [type(e) for e in events] == [StartEvent, DeltaEvent, DeltaEvent, DeltaEvent, DoneEvent]
    assert events[0].to_dict() == {
        "type": "start",
        "conversation_id": stream.conversation_id,
        "chain": chain.slug,
        "trace_id": stream.trace_id,
        "version": 1,
    }
    assert [e.to_dict() for e in events[1:4]] == [
        {"type": "delta", "text": "Hel"},
        {"type": "delta", "text": "lo"},
        {"type": "delta", "text": "!"},
    ]
    assert events[-1].to_dict() == {
        "type": "done",
        "reason": "complete",
        "conversation_id": stream.conversation_id,
        "message_id": events[-1].message_id,
        "stored": True,
        "content": "Hello!",
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
        "metadata": {},
        "finish_reason": "STOP",
        "finish_category": "stop",
        "trace_id": stream.trace_id,
        "version": 1,
        "sources": [],
        "tools": [],
        "timings": events[-1].outcome.timings,
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
    timings = events[-1].outcome.timings
    assert 0 < timings["time_to_first_token_ms"] <= timings["latency_ms"]
    assert stream.final_event is events[-1]
    [log] = await alogs()
    assert (log["status"], log["mode"]) == ("ok", "stream")
    assert 0 < log["time_to_first_token"] <= log["latency"]
    assert log["usage"]["total_tokens"] == 8
    assert [e["name"] for e in log["trace"]["entries"]] == ["AppendAdvisor", "stream"]
    key = f"{user.pk}:{stream.conversation_id}"
    assert [t for _, t, _ in await atranscript(key)] == ["hi", "Hello!"]
    assert (await ChatMessage.objects.aget(pk=events[-1].message_id)).text == "Hello!"


async def test_a_provider_error_mid_stream_is_one_error_event(chain: Any, user: Any) -> None:
    limited = RateLimitedError("slow down", retry_after=2.0)
    await script(chain.slug, ["partial ", "answer", limited])
    stream = await stream_turn(chain.slug, user, "hi")
    events = await collect(stream)
    assert [type(e) for e in events] == [StartEvent, DeltaEvent, DeltaEvent, ErrorEvent]
    assert events[-1].to_dict() == {
        "type": "error",
        "code": "rate_limited",
        "message": "slow down",
        "provider_status": 429,
        "retry_after": 2.0,
        "errors": {},
        "conversation_id": stream.conversation_id,
        "trace_id": stream.trace_id,
    }
    assert stream.exception is limited
    [log] = await alogs()
    assert (log["status"], log["error_type"], log["provider_status"]) == (
        "error",
        "RateLimitedError",
        429,
    )
    assert log["error_message"] == "[429] slow down"
    assert await atranscript(f"{user.pk}:{stream.conversation_id}") == [
        ("user", "hi", {}),
        (
            "assistant",
            "partial answer",
            {"interrupted": True, "finish_reason": "error", "trace_id": stream.trace_id},
        ),
    ]


async def test_a_failed_call_raises_the_original_error_and_logs_it(chain: Any, user: Any) -> None:
    down = ProviderUnavailableError("upstream 503", status=503)
    await script(chain.slug, down)
    with pytest.raises(ProviderUnavailableError) as caught:
        await call_turn(chain.slug, user, "hi")
    assert caught.value is down
    [log] = await alogs()
    assert (log["status"], log["provider_status"]) == ("error", 503)
    assert [e["status"] for e in log["trace"]["entries"]] == ["error", "error"]
    # A failed call stores nothing: not even the conversation it started (titled "hi").
    assert not await Conversation.objects.aexists()
    assert log["conversation_id"].startswith(f"{user.pk}:")  # the log still names it


async def test_a_stream_stopped_before_any_text_stores_nothing_and_says_so(
    chain: Any, user: Any
) -> None:
    model = await script(chain.slug, ["late"])
    model.chunk_delay = 1.0
    stream = await stream_turn(chain.slug, user, "hi")
    assert isinstance(await stream.__anext__(), StartEvent)
    task = asyncio.ensure_future(stream.__anext__())
    await asyncio.sleep(0.05)  # the model is thinking
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    done = stream.final_event.to_dict()
    assert (done["reason"], done["content"]) == ("cancelled", "")
    assert (done["conversation_id"], done["message_id"], done["stored"]) == (None, None, False)
    assert not await Conversation.objects.aexists()
    [log] = await alogs()
    assert log["status"] == "cancelled"


async def test_a_stream_closed_before_its_first_event_still_ends_the_turn(
    chain: Any, user: Any
) -> None:
    model = await script(chain.slug, "never")
    stream = await stream_turn(chain.slug, user, "hi")
    await stream.aclose()
    assert model.prompts == []
    done = stream.final_event.to_dict()
    assert (done["reason"], done["conversation_id"], done["stored"]) == ("cancelled", None, False)
    assert not await Conversation.objects.aexists()  # the conversation it started is removed
    [log] = await alogs()
    assert (log["status"], log["trace_id"]) == ("cancelled", stream.trace_id)


async def test_a_stream_closed_at_its_start_event_still_ends_the_turn(
    chain: Any, user: Any
) -> None:
    """Closed after ``start``, before the chain ran (a client that left at once): finished as
    a cancel — logged, the conversation it started removed — and only once."""
    model = await script(chain.slug, "never")
    stream = await stream_turn(chain.slug, user, "hi")
    assert isinstance(await anext(stream), StartEvent)
    await stream.aclose()
    await stream.aclose()
    assert model.prompts == []
    done = stream.final_event.to_dict()
    assert (done["reason"], done["conversation_id"], done["stored"]) == ("cancelled", None, False)
    assert not await Conversation.objects.aexists()
    [log] = await alogs()
    assert (log["status"], log["trace_id"]) == ("cancelled", stream.trace_id)


async def test_closing_the_stream_stops_the_model_and_still_logs(chain: Any, user: Any) -> None:
    model = await script(chain.slug, ["a", "b", "c", "d", "e"])
    model.chunk_delay = 0.05
    stream = await stream_turn(chain.slug, user, "hi")
    seen = []
    async for event in stream:
        seen.append(event)
        if isinstance(event, DeltaEvent):
            break
    await stream.aclose()
    assert model.events == ["stream", "cancel"]
    assert stream.final_event.to_dict()["reason"] == "cancelled"
    assert stream.final_event.content == "a"
    assert stream.final_event.conversation_id == stream.conversation_id
    assert stream.final_event.stored is True
    assert (await ChatMessage.objects.aget(pk=stream.final_event.message_id)).text == "a"
    [log] = await alogs()
    assert log["status"] == "cancelled" and log["time_to_first_token"] is not None
    assert await atranscript(f"{user.pk}:{stream.conversation_id}") == [
        ("user", "hi", {}),
        (
            "assistant",
            "a",
            {"interrupted": True, "finish_reason": "cancelled", "trace_id": stream.trace_id},
        ),
    ]


async def test_cancelling_the_consuming_task_stops_the_model_promptly(
    chain: Any, user: Any
) -> None:
    model = await script(chain.slug, ["x"] * 50)
    model.chunk_delay = 0.1
    stream = await stream_turn(chain.slug, user, "hi")
    first_delta = asyncio.Event()

    async def consume() -> None:
        async for event in stream:
            if isinstance(event, DeltaEvent):
                first_delta.set()

    task = asyncio.create_task(consume())
    await first_delta.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert model.events[-1] == "cancel"  # the model was stopped, not left to run to the end
    assert stream.final_event.reason == "cancelled"
    [log] = await alogs()
    assert log["status"] == "cancelled"
