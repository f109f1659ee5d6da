"""Finishing a turn, its one writer: what it stores (the memory advisors' appends, or the
exchange), what it leaves of a refused or failed turn, the reply carrying its own turn's
outcome, and its id known from the rows written."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import transaction
from django.db.backends.utils import CursorWrapper

from advisors_app.core import AssistantMessage, ProviderUnavailableError
from advisors_app.core.memory import TurnMemory
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import ChatMessage, Conversation
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.finish import write_messages
from tests.core.memory.messages import T, U, call
from tests.factories import make_chain, scripted_model
from tests.helpers import without_outcome
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


async def test_a_failure_in_an_existing_conversation_keeps_it(chain: Any, user: Any) -> None:
    await script(chain.slug, "first answer", ProviderUnavailableError("down", status=503))
    first = await call_turn(chain.slug, user, "hi")
    with pytest.raises(ProviderUnavailableError):
        await call_turn(chain.slug, user, "again", conversation_id=first.conversation_id)
    assert await atranscript(f"{user.pk}:{first.conversation_id}") == [
        ("user", "hi", {}),
        ("assistant", "first answer", {"trace_id": first.trace_id}),
    ]


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
    # The last: the first is the user's message, stored pending before the chain ran.
    stored = max(i for i, sql in enumerate(statements) if 'INTO "advisors_app_chatmessage"' in sql)
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


def written(*batches: list, metadata: dict | None = None) -> tuple[int | None, int | None]:
    """What the finish writes of a turn whose memory held ``batches``: (reply id, conversation
    pk)."""
    held = TurnMemory("c1")
    for batch in batches:
        held.append(batch)
    with transaction.atomic():
        return write_messages("c1", held.appends, metadata or {})


def test_the_stored_reply_id_comes_from_the_rows_written() -> None:
    reply_id, conversation_pk = written([U("hi"), AssistantMessage("hello")])
    reply = ChatMessage.objects.get(text="hello")
    assert (reply_id, conversation_pk) == (reply.pk, reply.conversation_id)


def test_a_tool_round_gives_the_final_reply_and_only_it_is_annotated() -> None:
    tool_call = call("c1")
    reply_id, _ = written(
        [U("weather?"), tool_call, T("c1"), AssistantMessage("Sunny.")],
        metadata={"trace_id": "t1", "version": 3},
    )
    reply = ChatMessage.objects.get(text="Sunny.")
    assert reply_id == reply.pk
    assert reply.metadata == {"trace_id": "t1", "version": 3}
    assert ChatMessage.objects.get(message_type="assistant", text="").metadata == {}


def test_a_turn_without_a_reply_names_none() -> None:
    reply_id, conversation_pk = written([U("hi")], metadata={"trace_id": "t1"})
    assert reply_id is None and conversation_pk is not None
    assert ChatMessage.objects.get().metadata == {}
    assert written() == (None, None)  # nothing held: nothing written
