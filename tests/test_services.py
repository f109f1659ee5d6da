"""The turn service in call and stream mode: validation, conversations, logs, cancellation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import AnonymousUser
from django.db.backends.utils import CursorWrapper
from django.test import override_settings

from advisors_app.core import (
    AssistantMessage,
    ChatGenerationMetadata,
    ChatResponse,
    ChatResponseMetadata,
    Generation,
    ProviderUnavailableError,
    RateLimitedError,
    ScriptedChatModel,
    Usage,
)
from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.memory.conversations import find_conversation, public_conversation_id
from advisors_app.models import CallLog, ChatMessage, Collection, Conversation, PromptTemplate
from advisors_app.turn.events import DeltaEvent, DoneEvent, ErrorEvent, StartEvent, TurnError
from advisors_app.turn.service import call_turn, stream_turn
from tests.factories import make_chain, scripted_model
from tests.helpers import without_outcome

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
def other(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def chain() -> Any:
    """A chain on a scripted model with an empty script: each test adds its answers."""
    return make_chain(
        model=scripted_model("script", responses=(), repeat=False),
        advisors=(("append", {"text": "!"}),),
        system_prompt="Be brief.",
    )


async def script(slug: str, *items: Any) -> ScriptedChatModel:
    """The cached chain's scripted model, with ``items`` appended to its script."""
    model = (await sync_to_async(load_chain)(slug)).client.chat_model
    model.add(*items)
    return model


def transcript(key: str) -> list[tuple[str, str, dict]]:
    rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
    return [(r.message_type, r.text, without_outcome(r.metadata)) for r in rows]


alogs = sync_to_async(lambda: list(CallLog.objects.order_by("created").values()))
atranscript = sync_to_async(transcript)


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


async def test_a_conversation_continues_and_belongs_to_its_owner(
    chain: Any, user: Any, other: Any
) -> None:
    await script(chain.slug, "one", "two", "theirs")
    first = await call_turn(chain.slug, user, "first")
    second = await call_turn(chain.slug, user, "second", conversation_id=first.conversation_id)
    assert second.conversation_id == first.conversation_id
    key = f"{user.pk}:{first.conversation_id}"
    assert [t for _, t, _ in await atranscript(key)] == ["first", "one", "second", "two"]

    # Bob sends Alice's id: it behaves as an id never used, a new conversation of his own.
    stolen = await call_turn(chain.slug, other, "peek", conversation_id=first.conversation_id)
    assert stolen.conversation_id == first.conversation_id
    assert [t for _, t, _ in await atranscript(key)] == ["first", "one", "second", "two"]
    assert [t for _, t, _ in await atranscript(f"{other.pk}:{first.conversation_id}")] == [
        "peek",
        "theirs",
    ]
    mine = await sync_to_async(find_conversation)(user, first.conversation_id)
    assert mine.owner_id == user.pk and mine.title == "first"
    assert public_conversation_id(mine.conversation_id) == first.conversation_id


async def test_a_conversation_of_another_chain_is_refused_and_kept(chain: Any, user: Any) -> None:
    await script(chain.slug, "one")
    first = await call_turn(chain.slug, user, "first")
    other_chain = await sync_to_async(make_chain)("json-answers")
    with pytest.raises(TurnError) as refused:
        await call_turn(other_chain.slug, user, "again", conversation_id=first.conversation_id)
    assert refused.value.code == "conflict" and refused.value.http_status == 409
    assert "start a new conversation" in refused.value.errors["conversation_id"][0]
    key = f"{user.pk}:{first.conversation_id}"
    assert [t for _, t, _ in await atranscript(key)] == ["first", "one"]


async def test_a_client_may_choose_the_id_of_a_new_conversation(chain: Any, user: Any) -> None:
    await script(chain.slug, "ok")
    result = await call_turn(chain.slug, user, "hi", conversation_id="trip-2024.05")
    assert result.conversation_id == "trip-2024.05"
    assert await Conversation.objects.filter(conversation_id=f"{user.pk}:trip-2024.05").aexists()


@pytest.mark.parametrize(
    ("kwargs", "code", "status", "errors"),
    [
        ({"message": "   "}, "invalid", 400, {"message": ["This field may not be blank."]}),
        ({"message": 5}, "invalid", 400, {"message": ["Not a valid string."]}),
        (
            {"message": "x" * 11},
            "invalid",
            400,
            {"message": ["Ensure this field has no more than 10 characters (it has 11)."]},
        ),
        ({"chain": "nope"}, "chain_not_found", 404, {"chain": ["No enabled chain 'nope'."]}),
        (
            {"conversation_id": "../etc"},
            "invalid",
            400,
            {
                "conversation_id": [
                    "Use at most 128 letters, digits and ._:- (starting with a letter or digit)."
                ]
            },
        ),
        (
            {"params": {"colour": "red"}},
            "invalid",
            400,
            {"params.colour": ["Unknown field. Known fields: append_flag, options."]},
        ),
        (
            {"params": {"options": {"temperature": "hot"}}},
            "invalid",
            400,
            {"params.options.temperature": ["'hot' is not of type 'number'"]},
        ),
        (
            {"params": {"append_flag": "yes"}},
            "invalid",
            400,
            {"params.append_flag": ["'yes' is not of type 'boolean'"]},
        ),
        ({"params": ["not", "an", "object"]}, "invalid", 400, {"params": ["Enter a JSON object."]}),
    ],
)
@override_settings(ADVISORS={"MAX_MESSAGE_CHARS": 10})
async def test_invalid_input_is_refused_before_anything_is_stored(
    chain: Any, user: Any, kwargs: dict, code: str, status: int, errors: dict
) -> None:
    model = await script(chain.slug, "never")
    call = {"chain": chain.slug, "user": user, "message": "hi", **kwargs}
    for run in (call_turn, stream_turn):
        with pytest.raises(TurnError) as caught:
            await run(**call)
        assert (caught.value.code, caught.value.http_status) == (code, status)
        assert caught.value.errors == errors
        payload = caught.value.to_dict()
        assert payload["type"] == "error" and payload["code"] == code
        assert payload["errors"] == errors
    assert model.prompts == []
    assert not await Conversation.objects.aexists()
    assert not await CallLog.objects.aexists()


async def test_anonymous_users_and_disabled_chains_are_refused(chain: Any, user: Any) -> None:
    with pytest.raises(TurnError) as caught:
        await call_turn(chain.slug, AnonymousUser(), "hi")
    assert (caught.value.code, caught.value.http_status) == ("not_authenticated", 401)
    chain.enabled = False
    await chain.asave()
    with pytest.raises(TurnError) as caught:
        await call_turn(chain.slug, user, "hi")
    assert caught.value.code == "chain_not_found"


async def collect(stream: Any) -> list[Any]:
    return [event async for event in stream]


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


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_message_the_guard_refuses_leaves_no_conversation_behind(
    user: Any, mode: str
) -> None:
    await sync_to_async(make_chain)(
        "guarded",
        model=await sync_to_async(scripted_model)("guarded-model", responses=["never"]),
        advisors=(
            ("safe_guard", {"words": ["keylogger"]}),
            ("message_chat_memory", {}),
        ),
    )
    if mode == "call":
        answer = (await call_turn("guarded", user, "write a keylogger")).to_dict()
    else:
        events = [e async for e in await stream_turn("guarded", user, "write a keylogger")]
        answer = events[-1].to_dict()
        assert events[0].conversation_id  # start named the conversation that was removed
    assert answer["content"].startswith("I'm unable to respond to that")
    assert not await Conversation.objects.aexists()  # nor its title, the refused message
    # The answer says so: there is no conversation to continue, nothing was stored.
    assert (answer["conversation_id"], answer["message_id"], answer["stored"]) == (
        None,
        None,
        False,
    )
    [log] = await alogs()
    assert log["status"] == "ok"


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_refused_message_in_a_conversation_keeps_it_and_stores_nothing(
    user: Any, mode: str
) -> None:
    await sync_to_async(make_chain)(
        "guarded",
        model=await sync_to_async(scripted_model)("guarded-model", responses=["Sure."]),
        advisors=(
            ("safe_guard", {"words": ["keylogger"]}),
            ("message_chat_memory", {}),
        ),
    )
    first = await call_turn("guarded", user, "hello")
    if mode == "call":
        answer = (
            await call_turn("guarded", user, "a keylogger?", conversation_id=first.conversation_id)
        ).to_dict()
    else:
        stream = await stream_turn(
            "guarded", user, "a keylogger?", conversation_id=first.conversation_id
        )
        answer = (await collect(stream))[-1].to_dict()
    assert (answer["conversation_id"], answer["message_id"], answer["stored"]) == (
        first.conversation_id,
        None,
        False,
    )
    key = f"{user.pk}:{first.conversation_id}"
    assert [t for _, t, _ in await atranscript(key)] == ["hello", "Sure."]


async def test_a_first_stream_that_fails_before_any_text_names_no_conversation(
    chain: Any, user: Any
) -> None:
    await script(chain.slug, [ProviderUnavailableError("down", status=503)])
    stream = await stream_turn(chain.slug, user, "hi")
    start, error = await collect(stream)
    assert start.conversation_id == stream.conversation_id
    assert error.to_dict()["conversation_id"] is None  # the conversation start named is gone
    assert error.trace_id == stream.trace_id
    assert not await Conversation.objects.aexists()


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


async def test_a_failure_in_an_existing_conversation_keeps_it(chain: Any, user: Any) -> None:
    await script(chain.slug, "first answer", ProviderUnavailableError("down", status=503))
    first = await call_turn(chain.slug, user, "hi")
    with pytest.raises(ProviderUnavailableError):
        await call_turn(chain.slug, user, "again", conversation_id=first.conversation_id)
    assert await atranscript(f"{user.pk}:{first.conversation_id}") == [
        ("user", "hi", {}),
        ("assistant", "first answer", {"trace_id": first.trace_id}),
    ]


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
    loop = asyncio.get_running_loop()
    started = loop.time()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert loop.time() - started < 1.0
    assert model.events[-1] == "cancel"
    assert stream.final_event.reason == "cancelled"
    [log] = await alogs()
    assert log["status"] == "cancelled"


async def test_params_reach_the_model_and_the_advisor_context(user: Any) -> None:
    template = await PromptTemplate.objects.acreate(
        slug="persona", text="You help {name}.", placeholders=["name"]
    )
    chain = await sync_to_async(make_chain)(
        "persona",
        model=await sync_to_async(scripted_model)("persona-model", responses=(), repeat=False),
        advisors=(("append", {"text": "!"}),),
        system_template=template,
    )
    model = await script(chain.slug, "ok", "ok")
    with pytest.raises(TurnError) as caught:
        await call_turn(chain.slug, user, "hi")
    assert caught.value.errors == {"params.system_params": ["This field is required."]}
    params = {
        "system_params": {"name": "Alice"},
        "options": {"temperature": 0.5, "max_tokens": 20},
        "append_flag": True,
    }
    result = await call_turn(chain.slug, user, "hi", params=params, trace_payloads=True)
    prompt = model.prompts[-1]
    assert prompt.system_message.text == "You help Alice."
    assert (prompt.options.temperature, prompt.options.max_tokens) == (0.5, 20)
    context = result.trace["entries"][0]["request"]["context"]
    assert context["append_flag"] is True
    assert context["chat_memory_conversation_id"] == f"{user.pk}:{result.conversation_id}"


async def test_a_chain_with_memory_lets_the_memory_advisor_persist(user: Any) -> None:
    chain = await sync_to_async(make_chain)(
        "remembers",
        model=await sync_to_async(scripted_model)("mem-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )
    model = await script(chain.slug, "Oslo is the capital of Norway.", "About 700,000.")
    first = await call_turn(chain.slug, user, "Tell me about Oslo")
    second = await call_turn(
        chain.slug, user, "Its population?", conversation_id=first.conversation_id
    )
    assert [m.text for m in model.prompts[-1].instructions] == [
        "Tell me about Oslo",
        "Oslo is the capital of Norway.",
        "Its population?",
    ]
    key = f"{user.pk}:{first.conversation_id}"
    assert [t for _, t, _ in await atranscript(key)] == [
        "Tell me about Oslo",
        "Oslo is the capital of Norway.",
        "Its population?",
        "About 700,000.",
    ]
    # Each stored reply carries its own turn's trace id; a failed turn stores nothing and
    # leaves the earlier replies' ids alone.
    model.add(ProviderUnavailableError("upstream 503", status=503))
    with pytest.raises(ProviderUnavailableError):
        await call_turn(chain.slug, user, "And Bergen?", conversation_id=first.conversation_id)
    replies = [meta for kind, _, meta in await atranscript(key) if kind == "assistant"]
    assert replies == [{"trace_id": first.trace_id}, {"trace_id": second.trace_id}]
    # The answers name the replies the memory advisor stored.
    for result, text in ((first, "Oslo is the capital of Norway."), (second, "About 700,000.")):
        assert result.stored is True
        assert (await ChatMessage.objects.aget(pk=result.message_id)).text == text


async def test_a_streamed_turn_of_a_memory_chain_answers_with_the_stored_reply(
    user: Any,
) -> None:
    chain = await sync_to_async(make_chain)(
        "remembers",
        model=await sync_to_async(scripted_model)("mem-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )
    await script(chain.slug, ["Hel", "lo"])
    stream = await stream_turn(chain.slug, user, "hi")
    done = (await collect(stream))[-1]
    assert (done.conversation_id, done.stored) == (stream.conversation_id, True)
    reply = await ChatMessage.objects.aget(pk=done.message_id)
    assert (reply.text, without_outcome(reply.metadata)) == ("Hello", {"trace_id": stream.trace_id})
    assert reply.metadata["timings"] == done.outcome.timings


@pytest.mark.parametrize("memory", [True, False], ids=["memory-advisor", "service"])
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_concurrent_turns_on_one_conversation_each_keep_their_own_trace_id(
    user: Any, memory: bool, mode: str
) -> None:
    """Turn A starts first and finishes last, after B stored its reply: each stored reply
    still names its own turn (a trace id patched in afterwards gave B's reply A's id)."""
    chain = await sync_to_async(make_chain)(
        "concurrent",
        model=await sync_to_async(scripted_model)("concurrent-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}),) if memory else (),
    )
    b_finished = asyncio.Event()

    async def slow_answer(prompt: Any) -> str:
        await b_finished.wait()
        return "answer A"

    model = await script(chain.slug, "hello", slow_answer, "answer B")
    first = await call_turn(chain.slug, user, "hello")
    conversation = first.conversation_id

    async def turn(message: str) -> tuple[str, int | None, str | None]:
        if mode == "call":
            result = await call_turn(chain.slug, user, message, conversation_id=conversation)
            return result.trace_id, result.message_id, result.conversation_id
        stream = await stream_turn(chain.slug, user, message, conversation_id=conversation)
        done = (await collect(stream))[-1]
        return stream.trace_id, done.message_id, done.conversation_id

    turn_a = asyncio.ensure_future(turn("question A"))
    while len(model.prompts) < 2:  # until A waits for its model
        await asyncio.sleep(0.01)
    b = await turn("question B")
    b_finished.set()
    a = await turn_a
    replies = {
        message.pk: (message.text, message.metadata["trace_id"])
        async for message in ChatMessage.objects.filter(message_type="assistant")
    }
    assert replies == {
        first.message_id: ("hello", first.trace_id),
        b[1]: ("answer B", b[0]),
        a[1]: ("answer A", a[0]),
    }
    assert a[0] != b[0] and a[2] == b[2] == conversation


@pytest.fixture
def knowledge(user: Any, other: Any) -> Any:
    """A shared collection with a shared document, one of Alice's and one of Bob's."""
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.")
    ingest_text(collection, "alice.md", "Alice's refund code is 1234.", owner=user)
    ingest_text(collection, "bob.md", "Bob's refund code is 9876.", owner=other)
    return make_chain(
        "rag",
        model=scripted_model("rag-model", responses=("ok",)),
        advisors=(("question_answer", {"collection": "kb", "top_k": 10}),),
    )


@pytest.mark.parametrize("run", ["call", "stream"])
async def test_retrieval_sees_shared_documents_and_the_callers_own_only(
    knowledge: Any, user: Any, other: Any, run: str
) -> None:
    model = (await sync_to_async(load_chain)(knowledge.slug)).client.chat_model
    for person, mine, theirs in ((user, "1234", "9876"), (other, "9876", "1234")):
        if run == "call":
            await call_turn(knowledge.slug, person, "What is my refund code?")
        else:
            await collect(await stream_turn(knowledge.slug, person, "What is my refund code?"))
        sent = model.prompts[-1].user_message.text
        assert "Refunds take 5 days." in sent and mine in sent
        assert theirs not in sent


async def test_the_semantic_cache_answers_each_user_from_their_own_entries(
    user: Any, other: Any
) -> None:
    chain = await sync_to_async(make_chain)(
        "cached",
        model=await sync_to_async(scripted_model)("cache-model", responses=(), repeat=False),
        advisors=(("semantic_cache", {"similarity_threshold": 0.9}),),
    )
    model = await script(chain.slug, "Alice's answer", "Bob's answer")
    assert (await call_turn(chain.slug, user, "What is a refund?")).content == "Alice's answer"
    again = await call_turn(chain.slug, user, "What is a refund?")
    assert again.content == "Alice's answer" and again.metadata["semantic_cache_hit"] is True
    assert (await call_turn(chain.slug, other, "What is a refund?")).content == "Bob's answer"
    assert len(model.prompts) == 2


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The SQL of every statement run from now on, in any thread (the ORM's worker too)."""
    seen: list[str] = []
    execute = CursorWrapper.execute

    def recording(self: CursorWrapper, sql: str, params: Any = None) -> Any:
        seen.append(sql)
        return execute(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", recording)
    return seen


@pytest.mark.parametrize("memory", [True, False], ids=["memory-advisor", "service"])
async def test_the_reply_carries_its_trace_id_and_its_id_comes_back_without_a_statement(
    user: Any, memory: bool, statements: list[str]
) -> None:
    chain = await sync_to_async(make_chain)(
        "lean",
        model=await sync_to_async(scripted_model)("lean-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}),) if memory else (),
    )
    await script(chain.slug, "one", "two")
    first = await call_turn(chain.slug, user, "first")
    statements.clear()
    second = await call_turn(chain.slug, user, "second", conversation_id=first.conversation_id)
    assert (second.stored, second.conversation_id) == (True, first.conversation_id)
    stored = next(i for i, sql in enumerate(statements) if 'INTO "advisors_app_chatmessage"' in sql)
    # Nothing reads the reply back or patches it afterwards.
    assert not [sql for sql in statements[stored + 1 :] if "advisors_app_chatmessage" in sql]
    assert [sql.split()[0] for sql in statements if "trace_id" in sql] == ["INSERT"]  # call log
    assert await atranscript(f"{user.pk}:{first.conversation_id}") == [
        ("user", "first", {}),
        ("assistant", "one", {"trace_id": first.trace_id}),
        ("user", "second", {}),
        ("assistant", "two", {"trace_id": second.trace_id}),
    ]
    assert (await ChatMessage.objects.aget(pk=second.message_id)).text == "two"


async def test_a_conversation_started_on_a_draft_stays_on_its_chain(user: Any) -> None:
    """A draft records no version: the chain its turns logged is the one it started on."""
    user.is_staff = True
    await user.asave(update_fields=["is_staff"])
    model = await sync_to_async(scripted_model)("drafted-model", responses=("ok",))
    drafted = await sync_to_async(make_chain)("drafted", model=model)
    first = await call_turn(drafted.slug, user, "first", version="draft")
    again = await call_turn(drafted.slug, user, "again", conversation_id=first.conversation_id)
    assert again.stored
    other_chain = await sync_to_async(make_chain)("json-answers", model=model)
    for choice in ({}, {"version": "draft"}):
        with pytest.raises(TurnError) as refused:
            await call_turn(
                other_chain.slug, user, "x", conversation_id=first.conversation_id, **choice
            )
        assert refused.value.code == "conflict" and refused.value.http_status == 409
