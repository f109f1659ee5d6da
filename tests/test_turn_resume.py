"""Resumable turns on the in-memory layer (issue 23): event ids, resume over the websocket and
over SSE with ``Last-Event-ID``, two tabs on one stream, the ``continue`` disconnect policy."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import AsyncClient, override_settings

from advisors_app.definition.runtime import clear_cache
from advisors_app.turn.buffer import SeenIds, events_after, parse_event_id
from tests.factories import make_chain, scripted_model
from tests.test_consumers import atranscript, frames_until_end, open_socket, script, text_of

pytestmark = pytest.mark.django_db(transaction=True)

WORDS = [f"w{n} " for n in range(12)]
ANSWER = "".join(WORDS)


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
    return make_chain(
        model=scripted_model("resumable", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )


def ids_of(frames: list[dict[str, Any]]) -> list[int]:
    return [parse_event_id(f["event_id"])[1] for f in frames]  # type: ignore[index]


async def first_frames(communicator: Any, count: int) -> list[dict[str, Any]]:
    return [await communicator.receive_json_from(timeout=5) for _ in range(count)]


async def wait_stored(key: str, timeout: float = 5.0) -> list[tuple[str, str, dict]]:
    """The transcript once it holds the reply (the turn ends after its client left)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        rows = await atranscript(key)
        if len(rows) >= 2 or asyncio.get_running_loop().time() > deadline:
            return rows
        await asyncio.sleep(0.05)


def test_events_after_and_seen_ids() -> None:
    frames = [{"event_id": f"t-{n}"} for n in range(1, 5)]
    assert events_after(frames, "t-2") == frames[2:]
    assert events_after(frames, None) == frames
    assert events_after(frames, "older-9") == frames  # another turn's id: the whole turn
    assert events_after(frames, "nonsense") == frames
    seen = SeenIds()
    assert [seen.first_time("c", f) for f in frames + frames[1:2]] == [True] * 4 + [False]
    assert seen.first_time("c", {"event_id": "u-1"})  # a new turn of the conversation
    assert not seen.first_time("c", {"event_id": "u-3"}, contiguous=True)  # a gap
    assert not seen.first_time("d", {"event_id": "v-2"}, contiguous=True)  # joined mid-turn
    assert seen.first_time("c", {"event_id": "u-2"}, contiguous=True)


@override_settings(ADVISORS={"DISCONNECT_POLICY": "continue", "STREAM_COALESCE_MS": 0})
async def test_a_dropped_socket_resumes_with_nothing_lost_or_duplicated(
    alice: Any, chain: Any
) -> None:
    await script(chain.slug, WORDS, delay=0.03)
    first = await open_socket(alice)
    await first.send_json_to({"type": "message", "text": "count"})
    before = await first_frames(first, 4)  # start and three deltas
    await first.disconnect()  # the laptop lid closes
    conversation = before[0]["conversation_id"]
    await asyncio.sleep(0.1)
    second = await open_socket(alice)
    await second.send_json_to(
        {"type": "resume", "conversation_id": conversation, "last_event_id": before[-1]["event_id"]}
    )
    after = await frames_until_end(second)
    frames = before + after
    assert ids_of(frames) == list(range(1, len(frames) + 1))  # none lost, none twice
    assert text_of(frames) == ANSWER
    assert after[-1]["type"] == "done" and after[-1]["reason"] == "complete"
    key = f"{alice.pk}:{conversation}"
    assert [(kind, text) for kind, text, _ in await wait_stored(key)] == [
        ("user", "count"),
        ("assistant", ANSWER),
    ]
    await second.disconnect()


@override_settings(ADVISORS={"DISCONNECT_POLICY": "continue", "STREAM_COALESCE_MS": 0})
async def test_continue_stores_the_whole_turn_after_the_client_left(alice: Any, chain: Any) -> None:
    await script(chain.slug, WORDS, delay=0.02)
    socket = await open_socket(alice)
    await socket.send_json_to({"type": "message", "text": "count"})
    start = await socket.receive_json_from(timeout=5)
    await socket.disconnect()
    rows = await wait_stored(f"{alice.pk}:{start['conversation_id']}")
    assert [(kind, text) for kind, text, _ in rows] == [("user", "count"), ("assistant", ANSWER)]
    assert "interrupted" not in rows[1][2]


@override_settings(ADVISORS={"STREAM_COALESCE_MS": 0})
async def test_the_default_policy_cancels_and_a_resume_gets_the_cancelled_done(
    alice: Any, chain: Any
) -> None:
    await script(chain.slug, WORDS, delay=0.03)
    first = await open_socket(alice)
    await first.send_json_to({"type": "message", "text": "count"})
    before = await first_frames(first, 3)
    await first.disconnect()
    second = await open_socket(alice)
    await second.send_json_to(
        {"type": "resume", "conversation_id": before[0]["conversation_id"], "last_event_id": None}
    )
    replay = await frames_until_end(second)
    assert ids_of(replay) == list(range(1, len(replay) + 1))
    assert replay[-1]["type"] == "done" and replay[-1]["reason"] == "cancelled"
    assert text_of(replay) == replay[-1]["content"]
    assert len(replay[-1]["content"]) < len(ANSWER)
    await second.disconnect()


@override_settings(ADVISORS={"STREAM_COALESCE_MS": 0})
async def test_two_tabs_see_one_stream_once(alice: Any, chain: Any) -> None:
    await script(chain.slug, WORDS, delay=0.03)
    talking, watching = await open_socket(alice), await open_socket(alice)
    await talking.send_json_to({"type": "message", "text": "count"})
    # The other tab sees the turn live, flagged (its page draws it when the conversation is
    # open); it then resumes the conversation from the start: nothing twice, nothing lost.
    live = await first_frames(watching, 3)
    assert all(f["resumed_elsewhere"] is True for f in live)
    conversation = live[0]["conversation_id"]
    await watching.send_json_to({"type": "resume", "conversation_id": conversation})
    rest = await frames_until_end(watching)
    own = await frames_until_end(talking)
    assert not any(f.get("resumed_elsewhere") for f in rest)
    assert [f["event_id"] for f in live + rest] == [f["event_id"] for f in own]
    assert text_of(live + rest) == ANSWER == text_of(own)
    await talking.disconnect()
    await watching.disconnect()


async def test_resume_of_an_unknown_or_foreign_conversation_is_an_error(
    alice: Any, bob: Any, chain: Any
) -> None:
    await script(chain.slug, "Hi.")
    mine = await open_socket(alice)
    await mine.send_json_to({"type": "message", "text": "hi"})
    conversation = (await frames_until_end(mine))[0]["conversation_id"]
    theirs = await open_socket(bob)
    for socket, conv in ((theirs, conversation), (mine, "no-such-conversation")):
        await socket.send_json_to({"type": "resume", "conversation_id": conv})
        frame = await socket.receive_json_from(timeout=5)
        while frame["type"] == "conversation":
            frame = await socket.receive_json_from(timeout=5)
        assert (frame["type"], frame["code"], frame["in_reply_to"]) == (
            "error",
            "not_found",
            "resume",
        )
    await theirs.send_json_to({"type": "resume", "conversation_id": 3, "extra": 1})
    frame = await theirs.receive_json_from(timeout=5)
    assert frame["code"] == "invalid" and set(frame["errors"]) == {"conversation_id", "extra"}
    await mine.disconnect()
    await theirs.disconnect()


def parse(body: str) -> list[dict[str, Any]]:
    frames = []
    for block in body.split("\n\n"):
        if not block.strip() or block.startswith(":"):
            continue
        fields = dict(line.split(": ", 1) for line in block.split("\n"))
        frame = json.loads(fields["data"])
        assert fields["id"] == frame["event_id"]
        frames.append(frame)
    return frames


async def dropped_sse(
    client: AsyncClient, url: str, *, frames: int, linger: float = 0.0
) -> list[dict[str, Any]]:
    """Start a turn (``count``) over SSE, read ``frames`` events, wait ``linger`` seconds, then
    drop the connection (Django cancels the task that streams the response); what was read."""
    response = await client.post(url, {"message": "count"}, content_type="application/json")
    assert response.status_code == 200
    body = ""

    async def read() -> None:
        nonlocal body
        async for part in response.streaming_content:
            body += part.decode()

    reader = asyncio.create_task(read())
    while len(parse(body)) < frames:
        await asyncio.sleep(0.005)
    await asyncio.sleep(linger)
    reader.cancel()
    await asyncio.gather(reader, return_exceptions=True)
    return parse(body)


@override_settings(ADVISORS={"DISCONNECT_POLICY": "continue"})
async def test_sse_reconnects_with_last_event_id(alice: Any, bob: Any, chain: Any) -> None:
    await script(chain.slug, WORDS, delay=0.03)
    client = AsyncClient()
    await client.aforce_login(alice)
    url = f"/api/chains/{chain.slug}/stream/"
    before = await dropped_sse(client, url, frames=3)
    conversation = before[0]["conversation_id"]
    resumed = await client.post(
        url,
        {"conversation_id": conversation, "resume": True},
        content_type="application/json",
        headers={"Last-Event-ID": before[-1]["event_id"]},
    )
    assert resumed.status_code == 200
    assert resumed["Content-Type"] == "text/event-stream; charset=utf-8"
    after = parse(b"".join([part async for part in resumed.streaming_content]).decode())
    frames = before + after
    assert ids_of(frames) == list(range(1, len(frames) + 1))
    assert text_of(frames) == ANSWER and frames[-1]["type"] == "done"
    rows = await wait_stored(f"{alice.pk}:{conversation}")
    assert [text for _, text, _ in rows] == ["count", ANSWER]
    # Another user's conversation is unknown; a malformed request is refused.
    other = AsyncClient()
    await other.aforce_login(bob)
    refused = await other.post(
        url, {"conversation_id": conversation, "resume": True}, content_type="application/json"
    )
    assert (refused.status_code, refused.json()["error"]["code"]) == (404, "not_found")
    bad = await other.post(url, {"resume": True, "x": 1}, content_type="application/json")
    assert bad.status_code == 400
    assert set(bad.json()["error"]["fields"]) == {"conversation_id", "x"}


@override_settings(ADVISORS={"STREAM_COALESCE_MS": 60_000})
async def test_an_sse_turn_cut_short_keeps_its_held_back_text_for_a_resume(
    alice: Any, chain: Any
) -> None:
    """SSE coalesces deltas as the websocket does; a client that leaves while text is held back
    cancels the turn, and a resume gets that text before the cancelled done."""
    await script(chain.slug, WORDS, delay=0.03)
    client = AsyncClient()
    await client.aforce_login(alice)
    url = f"/api/chains/{chain.slug}/stream/"
    # start, the first delta (sent at once); then more words arrive and are held back
    before = await dropped_sse(client, url, frames=2, linger=0.1)
    assert [f["type"] for f in before] == ["start", "delta"]
    conversation = before[0]["conversation_id"]
    rows = await wait_stored(f"{alice.pk}:{conversation}")
    after = parse(await sse_resume(alice, chain, conversation, before[-1]["event_id"]))
    assert [f["type"] for f in after] == ["delta", "done"] and after[-1]["reason"] == "cancelled"
    assert text_of(before + after) == after[-1]["content"] == rows[-1][1]
    assert ids_of(before + after) == [1, 2, 3, 4]


async def websocket_turn(user: Any, chain: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A finished two-chunk websocket turn: its socket and frames."""
    await script(chain.slug, ["Hel", "lo"])
    socket = await open_socket(user)
    await socket.send_json_to({"type": "message", "text": "hi"})
    return socket, await frames_until_end(socket)


async def sse_resume(user: Any, chain: Any, conversation_id: str, last_event_id: str) -> str:
    """The body of an SSE resume of ``conversation_id`` after ``last_event_id``."""
    client = AsyncClient()
    await client.aforce_login(user)
    resumed = await client.post(
        f"/api/chains/{chain.slug}/stream/",
        {"conversation_id": conversation_id, "resume": True},
        content_type="application/json",
        headers={"Last-Event-ID": last_event_id},
    )
    return b"".join([part async for part in resumed.streaming_content]).decode()


async def test_a_websocket_turn_resumes_over_sse(alice: Any, chain: Any) -> None:
    socket, frames = await websocket_turn(alice, chain)
    body = await sse_resume(alice, chain, frames[0]["conversation_id"], frames[1]["event_id"])
    assert parse(body) == frames[2:]
    await socket.disconnect()


async def test_an_sse_resume_after_the_final_frame_ends_at_once(alice: Any, chain: Any) -> None:
    """Before: nothing was after the client's ``done``, and the stream waited for more
    (keep-alives only) until the client gave up."""
    socket, frames = await websocket_turn(alice, chain)
    resumed = sse_resume(alice, chain, frames[0]["conversation_id"], frames[-1]["event_id"])
    body = await asyncio.wait_for(resumed, 5)
    assert parse(body) == []
    await socket.disconnect()


async def test_a_resume_on_the_socket_that_ran_the_turn_sends_nothing_again(
    alice: Any, chain: Any
) -> None:
    """Before: the socket counted only the frames it had resumed or received from the group
    as delivered, so a resume of its own turn sent the whole turn again (found by an
    acceptance pass)."""
    socket, frames = await websocket_turn(alice, chain)
    conversation = frames[0]["conversation_id"]
    # The announcement the turn's task sends once its frames are published (the buffer holds
    # the turn by then), then the resume.
    assert (await socket.receive_json_from())["type"] == "conversation"
    await socket.send_json_to(
        {"type": "resume", "conversation_id": conversation, "last_event_id": None}
    )
    assert await socket.receive_nothing(0.5)
    await socket.disconnect()


async def test_a_stream_request_with_resume_not_true_is_refused_as_such(
    alice: Any, chain: Any
) -> None:
    """Before: ``"resume": "yes"`` ran as a turn request and was refused as an unknown field
    with a missing message."""
    client = AsyncClient()
    await client.aforce_login(alice)
    answer = await client.post(
        f"/api/chains/{chain.slug}/stream/",
        {"conversation_id": "c", "resume": "yes"},
        content_type="application/json",
    )
    assert answer.status_code == 400
    assert answer.json()["error"]["fields"] == {
        "resume": ["Send true to resume a turn (leave it out to run one)."]
    }
