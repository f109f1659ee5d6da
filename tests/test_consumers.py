"""The chat websocket through the site's ASGI stack: auth, origin, frames, cancel, coalescing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client, override_settings

from advisors_app.channels.consumers import CLOSE_NOT_AUTHENTICATED, MAX_FRAME_BYTES
from advisors_app.core import ProviderUnavailableError, RateLimitedError, ScriptedChatModel
from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.models import CallLog, ChatMessage, Conversation
from advisorsite.asgi import application
from tests.factories import make_chain, scripted_model
from tests.helpers import without_outcome

pytestmark = pytest.mark.django_db(transaction=True)

HOST = (b"host", b"127.0.0.1:8000")
ORIGIN = (b"origin", b"http://127.0.0.1:8000")


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def chain() -> Any:
    return make_chain(model=scripted_model("script", responses=(), repeat=False))


@pytest.fixture
def memory_chain() -> Any:
    return make_chain(
        "remembers",
        model=scripted_model("mem-script", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )


async def script(slug: str, *items: Any, delay: float = 0.0) -> ScriptedChatModel:
    """The cached chain's scripted model, with ``items`` appended and ``delay`` per chunk."""
    model = (await sync_to_async(load_chain)(slug)).client.chat_model
    model.add(*items)
    model.chunk_delay = delay
    return model


@sync_to_async
def session_cookie(user: Any) -> tuple[bytes, bytes]:
    client = Client()
    client.force_login(user)
    return (b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())


async def open_socket(user: Any | None, slug: str = "support", origin: Any = ORIGIN) -> Any:
    headers = [HOST, origin] if origin else [HOST]
    if user is not None:
        headers.append(await session_cookie(user))
    communicator = WebsocketCommunicator(application, f"/ws/chat/{slug}/", headers=headers)
    connected, _ = await communicator.connect()
    assert connected
    return communicator


@pytest.fixture
async def socket(alice: Any, chain: Any) -> AsyncIterator[Any]:
    communicator = await open_socket(alice)
    yield communicator
    await communicator.disconnect()


async def frames_until_end(communicator: Any, timeout: float = 5.0) -> list[dict[str, Any]]:
    """Frames up to and including the turn's ``done`` or ``error`` (``conversation`` skipped)."""
    frames = []
    while True:
        frame = await communicator.receive_json_from(timeout=timeout)
        if frame["type"] == "conversation":
            continue
        frames.append(frame)
        if frame["type"] in ("done", "error"):
            return frames


async def drain(communicator: Any, quiet: float = 0.3) -> list[dict[str, Any]]:
    """Every frame that arrives until none has for ``quiet`` seconds."""
    frames = []
    while not await communicator.receive_nothing(timeout=quiet):
        frames.append(await communicator.receive_json_from())
    return frames


def text_of(frames: list[dict[str, Any]]) -> str:
    return "".join(f["text"] for f in frames if f["type"] == "delta")


def transcript(key: str) -> list[tuple[str, str, dict]]:
    rows = ChatMessage.objects.filter(conversation__conversation_id=key).order_by("sequence")
    return [(r.message_type, r.text, without_outcome(r.metadata)) for r in rows]


atranscript = sync_to_async(transcript)
alogs = sync_to_async(lambda: list(CallLog.objects.order_by("created").values()))


async def test_anonymous_users_get_an_error_frame_and_close_code_4401(chain: Any) -> None:
    communicator = await open_socket(None)
    frame = await communicator.receive_json_from()
    assert (frame["type"], frame["code"]) == ("error", "not_authenticated")
    assert await communicator.receive_output() == {
        "type": "websocket.close",
        "code": CLOSE_NOT_AUTHENTICATED,
    }
    await communicator.disconnect()


@pytest.mark.parametrize(
    "origin",
    [
        (b"origin", b"http://evil.example"),
        (b"origin", b"null"),
        (b"origin", b"http://127.0.0.1:9999"),  # another port of an allowed host
        (b"origin", b"https://127.0.0.1:8000"),  # another scheme
        None,
    ],
)
async def test_a_page_from_another_origin_cannot_connect(
    alice: Any, chain: Any, origin: Any
) -> None:
    headers = [HOST, await session_cookie(alice)] + ([origin] if origin else [])
    communicator = WebsocketCommunicator(application, "/ws/chat/support/", headers=headers)
    connected, _ = await communicator.connect()
    assert not connected


async def test_a_turn_streams_start_deltas_and_done_and_is_stored(
    socket: Any, alice: Any, chain: Any
) -> None:
    model = await script(chain.slug, ["Hel", "lo ", "there"], delay=0.06)
    await socket.send_json_to({"type": "message", "text": "hi"})
    frames = await frames_until_end(socket)
    start, *deltas, done = frames
    trace = start["trace_id"]
    assert start == {
        "type": "start",
        "conversation_id": start["conversation_id"],
        "chain": chain.slug,
        "trace_id": trace,
        "version": 1,
        "event_id": f"{trace}-1",
    }
    # Chunks 60 ms apart are slower than the coalescing interval: each is its own frame.
    assert deltas == [
        {"type": "delta", "text": "Hel", "event_id": f"{trace}-2"},
        {"type": "delta", "text": "lo ", "event_id": f"{trace}-3"},
        {"type": "delta", "text": "there", "event_id": f"{trace}-4"},
    ]
    assert done["event_id"] == f"{trace}-5"
    assert done["type"] == "done" and done["reason"] == "complete"
    assert done["content"] == "Hello there"
    assert done["trace_id"] == start["trace_id"]
    assert done["conversation_id"] == start["conversation_id"]
    assert set(done) >= {"usage", "metadata", "finish_reason"}
    assert done["stored"] is True
    assert model.prompts[-1].user_message.text == "hi"
    key = f"{alice.pk}:{start['conversation_id']}"
    assert await atranscript(key) == [
        ("user", "hi", {}),
        ("assistant", "Hello there", {"trace_id": start["trace_id"]}),
    ]
    assert (await ChatMessage.objects.aget(pk=done["message_id"])).text == "Hello there"

    # The next message continues the conversation it names.
    await script(chain.slug, "again")
    await socket.send_json_to(
        {"type": "message", "text": "more", "conversation_id": start["conversation_id"]}
    )
    frames = await frames_until_end(socket)
    assert frames[0]["conversation_id"] == start["conversation_id"]
    assert [t for _, t, _ in await atranscript(key)] == ["hi", "Hello there", "more", "again"]


@override_settings(ADVISORS={"STREAM_COALESCE_MS": 40, "STREAM_COALESCE_CHARS": 64})
async def test_fast_tokens_are_coalesced_without_delaying_the_first(
    socket: Any, chain: Any
) -> None:
    tokens = [f"t{i:03d} " for i in range(300)]  # 5 characters each, one every ~2 ms
    await script(chain.slug, tokens, delay=0.002)
    await socket.send_json_to({"type": "message", "text": "hi"})
    frames = await frames_until_end(socket)
    deltas = [f["text"] for f in frames if f["type"] == "delta"]
    assert "".join(deltas) == "".join(tokens)  # nothing lost, nothing reordered
    assert deltas[0] == tokens[0]  # the first token is sent as soon as it arrives
    assert len(deltas) < len(tokens) / 5
    assert all(len(d) < 64 + 5 for d in deltas)
    assert frames[-1]["content"] == "".join(tokens)


@override_settings(ADVISORS={"STREAM_COALESCE_MS": 0})
async def test_coalescing_can_be_turned_off(socket: Any, chain: Any) -> None:
    tokens = [f"{i} " for i in range(50)]
    await script(chain.slug, tokens, delay=0.001)
    await socket.send_json_to({"type": "message", "text": "hi"})
    frames = await frames_until_end(socket)
    assert [f["text"] for f in frames if f["type"] == "delta"] == tokens


async def test_b31_cancel_is_acted_on_promptly_while_tokens_stream(
    socket: Any, alice: Any, chain: Any
) -> None:
    model = await script(chain.slug, [f"w{i} " for i in range(30)], delay=0.1)
    loop = asyncio.get_running_loop()
    await socket.send_json_to({"type": "message", "text": "Write a poem"})
    frames = [await socket.receive_json_from()]
    sent_at = loop.time()
    while loop.time() - sent_at < 0.5:
        frames.append(await socket.receive_json_from(timeout=1))
    cancelled_at = loop.time()
    await socket.send_json_to({"type": "cancel"})
    frames += await frames_until_end(socket)
    assert loop.time() - cancelled_at < 0.2
    done = frames[-1]
    assert (done["type"], done["reason"]) == ("done", "cancelled")
    assert done["finish_category"] == "cancelled"
    assert [f["type"] for f in frames].count("done") == 1
    assert (done["conversation_id"], done["stored"]) == (frames[0]["conversation_id"], True)
    assert model.events == ["stream", "cancel"]  # the upstream stream was closed
    streamed = text_of(frames)
    assert streamed == done["content"] and 3 <= len(streamed.split()) < 30
    # No turn frame after done; only the notice that the conversation changed.
    assert [f["type"] for f in await drain(socket)] == ["conversation"]
    key = f"{alice.pk}:{done['conversation_id']}"
    assert await atranscript(key) == [
        ("user", "Write a poem", {}),
        (
            "assistant",
            streamed,
            {"interrupted": True, "finish_reason": "cancelled", "trace_id": done["trace_id"]},
        ),
    ]
    [log] = await alogs()
    assert log["status"] == "cancelled"
    stored = await ChatMessage.objects.aget(pk=done["message_id"])
    assert (stored.text, stored.metadata["interrupted"]) == (streamed, True)

    # The socket stays usable; a cancel with nothing running does nothing.
    await socket.send_json_to({"type": "cancel"})
    await script(chain.slug, "fine")
    await socket.send_json_to({"type": "message", "text": "again"})
    assert [f["type"] for f in await frames_until_end(socket)] == ["start", "delta", "done"]


async def test_b31_closing_the_socket_cancels_and_awaits_everything(alice: Any, chain: Any) -> None:
    model = await script(chain.slug, [f"w{i} " for i in range(30)], delay=0.1)
    communicator = await open_socket(alice)
    await communicator.send_json_to({"type": "message", "text": "Write a poem"})
    start = await communicator.receive_json_from()
    await asyncio.sleep(0.5)
    loop = asyncio.get_running_loop()
    closed_at = loop.time()
    await communicator.disconnect(timeout=2)
    # The application returned by itself (the communicator did not have to cancel it).
    assert communicator.future.done() and not communicator.future.cancelled()
    assert communicator.future.exception() is None
    assert loop.time() - closed_at < 0.2
    assert model.events == ["stream", "cancel"]
    [log] = await alogs()
    assert log["status"] == "cancelled"
    [(_, question, _), (_, answer, flags)] = await atranscript(
        f"{alice.pk}:{start['conversation_id']}"
    )
    assert question == "Write a poem" and answer.startswith("w0 w1 w2")
    assert flags == {
        "interrupted": True,
        "finish_reason": "cancelled",
        "trace_id": start["trace_id"],
    }


async def test_b06_a_closed_socket_keeps_the_partial_turn_in_memory(
    alice: Any, memory_chain: Any
) -> None:
    poem = ["Roses", " are", " red", ",", " violets", " are", " blue", ",", " sugar", " is"]
    model = await script(memory_chain.slug, poem, "Noted.", delay=0.05)
    communicator = await open_socket(alice, memory_chain.slug)
    await communicator.send_json_to({"type": "message", "text": "Write a poem"})
    frames = [await communicator.receive_json_from()]
    while len([f for f in frames if f["type"] == "delta"]) < 3:
        frames.append(await communicator.receive_json_from())
    await communicator.disconnect()
    assert model.events[-1] == "cancel"
    conversation = frames[0]["conversation_id"]
    [(_, question, _), (_, answer, flags)] = await atranscript(f"{alice.pk}:{conversation}")
    assert question == "Write a poem"
    assert answer.startswith("Roses are red") and answer == "".join(poem[: len(answer.split())])
    assert flags == {
        "interrupted": True,
        "finish_reason": "cancelled",
        "trace_id": frames[0]["trace_id"],
    }

    # The next turn sees the interrupted exchange.
    communicator = await open_socket(alice, memory_chain.slug)
    await communicator.send_json_to(
        {"type": "message", "text": "Go on", "conversation_id": conversation}
    )
    await frames_until_end(communicator)
    await communicator.disconnect()
    assert [m.text for m in model.prompts[-1].instructions] == ["Write a poem", answer, "Go on"]


async def test_a_second_message_while_generating_is_refused(socket: Any, chain: Any) -> None:
    await script(chain.slug, ["one ", "two ", "three"], delay=0.05)
    await socket.send_json_to({"type": "message", "text": "first"})
    assert (await socket.receive_json_from())["type"] == "start"
    await socket.send_json_to({"type": "message", "text": "second"})
    frames = await frames_until_end(socket)
    busy = [f for f in frames if f["type"] == "error"]
    # The refusal arrives while the first turn streams; the first turn completes untouched.
    assert busy and busy[0]["code"] == "busy"
    if frames[-1]["type"] == "error":
        frames += await frames_until_end(socket)
    assert frames[-1]["type"] == "done" and frames[-1]["content"] == "one two three"
    assert text_of(frames) == "one two three"


async def test_a_message_right_after_done_is_accepted(socket: Any, chain: Any) -> None:
    """The turn stops counting as running when its done frame is sent (not after its notice)."""
    await script(chain.slug, *(f"answer {i}" for i in range(10)))
    conversation = None
    for i in range(10):
        frame = {"type": "message", "text": f"question {i}"}
        if conversation:
            frame["conversation_id"] = conversation
        await socket.send_json_to(frame)
        frames = await frames_until_end(socket)
        assert frames[-1]["type"] == "done", frames
        conversation = frames[0]["conversation_id"]


@pytest.mark.parametrize(
    ("raw", "errors"),
    [
        ("not json", {"frame": ["Not valid JSON."]}),
        ("[1, 2]", {"frame": ["Expected a JSON object."]}),
        ('"text"', {"frame": ["Expected a JSON object."]}),
        (
            '{"text": "hi"}',
            {"type": ["This field is required. Known types: cancel, feedback, message, resume."]},
        ),
        (
            '{"type": "shout"}',
            {
                "type": [
                    "Unknown frame type 'shout'. Known types: cancel, feedback, message, resume."
                ]
            },
        ),
        ('{"type": "message"}', {"message": ["This field is required."]}),
        ('{"type": "cancel", "x": 1}', {"x": ["Unknown field."]}),
        ('{"type": "message", "text": 5}', {"text": ["Not a valid string."]}),
        ('{"type": "message", "message": 5}', {"message": ["Not a valid string."]}),
        (
            '{"type": "message", "message": "hi", "text": "hi"}',
            {"message": ["Send the message as message or as text (its alias), not both."]},
        ),
        (
            '{"type": "message", "text": "hi", "conversationId": "x"}',
            {
                "conversationId": [
                    "Unknown field. Known fields: message, decisions, conversation_id, params, "
                    "label, version."
                ]
            },
        ),
    ],
)
async def test_malformed_frames_get_an_error_frame_and_the_socket_stays_usable(
    socket: Any, chain: Any, raw: str, errors: dict
) -> None:
    await socket.send_to(text_data=raw)
    frame = await socket.receive_json_from()
    assert (frame["type"], frame["code"], frame["errors"]) == ("error", "invalid", errors)
    await script(chain.slug, "still here")
    await socket.send_json_to({"type": "message", "text": "hi"})
    assert (await frames_until_end(socket))[-1]["content"] == "still here"
    await script(chain.slug, "by its name")
    await socket.send_json_to({"type": "message", "message": "hi"})  # the name every transport uses
    assert (await frames_until_end(socket))[-1]["content"] == "by its name"


@pytest.mark.parametrize(
    "data",
    [
        {"text_data": '{"type": "message", "message": "' + "x" * (MAX_FRAME_BYTES + 1) + '"}'},
        # Counted in bytes: 90,000 three-byte characters are past the limit.
        {"text_data": '{"type": "message", "message": "' + "\u20ac" * 90_000 + '"}'},
        {"bytes_data": b"x" * (MAX_FRAME_BYTES + 1)},
    ],
    ids=["text", "utf-8", "binary"],
)
async def test_a_frame_over_the_limit_gets_an_error_frame_then_close_4009(
    socket: Any, data: dict[str, Any]
) -> None:
    await socket.send_to(**data)
    frame = await socket.receive_json_from()
    size = len(data.get("bytes_data") or data["text_data"].encode())
    assert (frame["type"], frame["code"], frame["errors"]) == (
        "error",
        "invalid",
        {"frame": [f"The frame is {size} bytes; at most {MAX_FRAME_BYTES} are read."]},
    )
    assert await socket.receive_output() == {"type": "websocket.close", "code": 4009}
    assert not await sync_to_async(ChatMessage.objects.exists)()


async def test_a_frame_just_under_the_limit_is_read(socket: Any, chain: Any) -> None:
    await script(chain.slug, "read")
    padding = MAX_FRAME_BYTES - len('{"type": "message", "message": "hi", "params": {"x": ""}}')
    await socket.send_to(
        text_data='{"type": "message", "message": "hi", "params": {"x": "' + "y" * padding + '"}}'
    )
    frame = await socket.receive_json_from()
    assert frame["type"] == "error" and set(frame["errors"]) == {"params.x"}  # read and judged
    await socket.send_json_to({"type": "message", "message": "hi"})
    assert (await frames_until_end(socket))[-1]["content"] == "read"


async def test_binary_frames_are_refused(socket: Any) -> None:
    await socket.send_to(bytes_data=b"\x00\x01")
    frame = await socket.receive_json_from()
    assert frame["errors"] == {"frame": ["Send JSON text frames, not binary."]}


@pytest.mark.parametrize(
    "text",
    [
        '{"type": "message", "text": "hi", "params": {"options": {"temperature": NaN}}}',
        '{"type": "message", "text": "hi", "params": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ],
    ids=["nan", "nested-too-deep"],
)
async def test_what_is_not_json_is_an_error_frame_and_the_socket_stays_open(
    socket: Any, chain: Any, text: str
) -> None:
    await socket.send_to(text_data=text)
    frame = await socket.receive_json_from()
    assert (frame["code"], frame["errors"]) == ("invalid", {"frame": ["Not valid JSON."]})
    await script(chain.slug, "still here")
    await socket.send_json_to({"type": "message", "text": "hi"})
    assert (await frames_until_end(socket))[-1]["content"] == "still here"


@pytest.mark.parametrize(
    ("frame", "code", "errors"),
    [
        ({"text": "   "}, "invalid", {"text": ["This field may not be blank."]}),
        ({"message": "   "}, "invalid", {"message": ["This field may not be blank."]}),
        (
            {"text": "hi", "conversation_id": 7},
            "invalid",
            {"conversation_id": ["Enter a conversation id (a non-empty string) or omit it."]},
        ),
        ({"text": "hi", "params": []}, "invalid", {"params": ["Enter a JSON object."]}),
        (
            {"text": "hi", "params": {"colour": "red"}},
            "invalid",
            {"params.colour": ["Unknown field. Known fields: options."]},
        ),
        ({"text": "hi\x00"}, "invalid", {"text": ["Null characters are not allowed."]}),
        (
            {"text": "hi \ud800"},
            "invalid",
            {"text": ["Unpaired surrogate characters are not allowed."]},
        ),
        (
            {"text": "hi", "params": {"options": {"max_tokens": 10**20}}},
            "invalid",
            {
                "params.options.max_tokens": [
                    "100000000000000000000 is greater than the maximum of 1000000"
                ]
            },
        ),
    ],
)
async def test_input_the_service_refuses_is_an_error_frame_and_nothing_is_stored(
    socket: Any, chain: Any, frame: dict, code: str, errors: dict
) -> None:
    model = await script(chain.slug, "never")
    await socket.send_json_to({"type": "message", **frame})
    [refused] = await frames_until_end(socket)
    assert (refused["code"], refused["errors"]) == (code, errors)
    assert model.prompts == []
    assert not await CallLog.objects.aexists()


async def test_an_unknown_chain_is_an_error_frame(alice: Any) -> None:
    communicator = await open_socket(alice, "nope")
    await communicator.send_json_to({"type": "message", "text": "hi"})
    frame = await communicator.receive_json_from()
    assert (frame["code"], frame["errors"]) == (
        "chain_not_found",
        {"chain": ["No enabled chain 'nope'."]},
    )
    await communicator.disconnect()


async def test_a_provider_error_mid_stream_is_one_error_frame(socket: Any, chain: Any) -> None:
    await script(chain.slug, ["partial ", RateLimitedError("slow down", retry_after=2.0)])
    await socket.send_json_to({"type": "message", "text": "hi"})
    frames = await frames_until_end(socket)
    assert [f["type"] for f in frames] == ["start", "delta", "error"]
    assert frames[-1]["code"] == "rate_limited" and frames[-1]["retry_after"] == 2.0
    assert frames[-1]["trace_id"] == frames[0]["trace_id"]


async def test_another_users_conversation_id_reaches_nothing_of_theirs(
    alice: Any, bob: Any, memory_chain: Any
) -> None:
    model = await script(memory_chain.slug, "Your code is 1234.", "I don't know.")
    theirs = await open_socket(alice, memory_chain.slug)
    await theirs.send_json_to({"type": "message", "text": "My code is 1234"})
    conversation = (await frames_until_end(theirs))[0]["conversation_id"]
    mine = await open_socket(bob, memory_chain.slug)
    await mine.send_json_to(
        {"type": "message", "text": "What is the code?", "conversation_id": conversation}
    )
    frames = await frames_until_end(mine)
    assert frames[-1]["content"] == "I don't know."
    # Bob's turn started a conversation of his own: the model saw none of Alice's messages.
    assert [m.text for m in model.prompts[-1].instructions] == ["What is the code?"]
    assert [t for _, t, _ in await atranscript(f"{alice.pk}:{conversation}")] == [
        "My code is 1234",
        "Your code is 1234.",
    ]
    # Alice's socket heard about her own conversation only.
    assert (await theirs.receive_json_from())["type"] == "conversation"
    assert await theirs.receive_nothing(timeout=0.2)
    for communicator in (theirs, mine):
        await communicator.disconnect()


async def test_every_socket_of_the_user_hears_of_a_changed_conversation(
    alice: Any, bob: Any, chain: Any
) -> None:
    await script(chain.slug, "ok")
    talking, other_tab, stranger = (
        await open_socket(alice),
        await open_socket(alice),
        await open_socket(bob),
    )
    await talking.send_json_to({"type": "message", "text": "Plan a trip to Oslo"})
    frames = await frames_until_end(talking)
    start = frames[0]
    # The other tab sees the same turn (flagged: it did not send it), then the notice.
    watched = await frames_until_end(other_tab)
    assert watched == [
        {"conversation_id": start["conversation_id"], **f, "resumed_elsewhere": True}
        for f in frames
    ]
    expected = {
        "type": "conversation",
        "conversation_id": start["conversation_id"],
        "title": "Plan a trip to Oslo",
        "removed": False,
    }
    assert await other_tab.receive_json_from() == expected
    assert await talking.receive_json_from() == expected
    assert await stranger.receive_nothing(timeout=0.2)
    for communicator in (talking, other_tab, stranger):
        await communicator.disconnect()


async def test_a_turn_that_stored_nothing_announces_its_conversation_removed(
    socket: Any, chain: Any
) -> None:
    await script(chain.slug, ProviderUnavailableError("down", status=503))
    await socket.send_json_to({"type": "message", "text": "hi"})
    start, error = await frames_until_end(socket)
    assert (error["type"], error["conversation_id"]) == ("error", None)
    assert await socket.receive_json_from() == {
        "type": "conversation",
        "conversation_id": start["conversation_id"],
        "title": "",
        "removed": True,
    }


async def test_a_refused_first_message_ends_with_no_conversation(alice: Any) -> None:
    await sync_to_async(make_chain)(
        "guarded",
        model=await sync_to_async(scripted_model)("guarded-model", responses=["Sure."]),
        advisors=(("safe_guard", {"words": ["keylogger"]}), ("message_chat_memory", {})),
    )
    communicator = await open_socket(alice, "guarded")
    await communicator.send_json_to({"type": "message", "text": "write a keylogger"})
    frames = await frames_until_end(communicator)
    start, done = frames[0], frames[-1]
    assert done["finish_reason"] == "CONTENT_FILTER"
    assert (done["conversation_id"], done["message_id"], done["stored"]) == (None, None, False)
    assert (await communicator.receive_json_from())["removed"] is True
    assert not await Conversation.objects.filter(
        conversation_id=f"{alice.pk}:{start['conversation_id']}"
    ).aexists()
    await communicator.disconnect()


async def test_a_turn_cancelled_before_any_text_stores_nothing_and_says_so(
    socket: Any, chain: Any
) -> None:
    await script(chain.slug, ["late"], delay=2.0)
    await socket.send_json_to({"type": "message", "text": "hi"})
    start = await socket.receive_json_from()
    await socket.send_json_to({"type": "cancel"})
    [done] = await frames_until_end(socket)
    assert (done["type"], done["reason"], done["content"]) == ("done", "cancelled", "")
    assert (done["conversation_id"], done["message_id"], done["stored"]) == (None, None, False)
    assert done["trace_id"] == start["trace_id"]
    assert not await Conversation.objects.aexists()


@override_settings(ADVISORS={"CHAT_THROTTLE_RATE": "1/minute"})
async def test_turns_over_the_chat_rate_are_refused(socket: Any, chain: Any) -> None:
    """The websocket spends the per-user budget of the REST chat endpoints, and refused
    frames spend none of it."""
    await script(chain.slug, "one", "two")
    await socket.send_json_to({"type": "message", "text": "   "})
    assert (await socket.receive_json_from())["code"] == "invalid"
    await socket.send_json_to({"type": "message", "text": "first"})
    assert (await frames_until_end(socket))[-1]["type"] == "done"
    await socket.send_json_to({"type": "message", "text": "second"})
    [refused] = await frames_until_end(socket)
    assert refused["type"] == "error" and refused["code"] == "throttled"
    assert 0 < refused["retry_after"] <= 60
    assert refused["message"].startswith("Too many messages: try again in ")
    await socket.send_json_to({"type": "cancel"})  # nothing runs: still a usable socket
    # Only the first turn's conversation notice may still arrive (the layer is asynchronous).
    assert {frame["type"] for frame in await drain(socket, quiet=0.2)} <= {"conversation"}
