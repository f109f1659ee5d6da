"""The chat websocket's ``feedback`` frame (issue 22): a vote on a streamed reply right after
its ``done`` frame, acknowledged with the stored score; refusals as ``error`` frames that do
not disturb a running turn; the same vote through REST with the ``done`` frame's id."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.definition.runtime import clear_cache
from advisors_app.models import CallLog, ChatMessage, Score
from tests.api.conftest import client_for
from tests.factories import make_chain, scripted_model
from tests.test_consumers import frames_until_end, open_socket, script, text_of

pytestmark = pytest.mark.django_db(transaction=True)


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


async def streamed_reply(socket: Any) -> dict[str, Any]:
    """One turn's ``done`` frame (its reply streamed in three deltas)."""
    await script("support", ["Five ", "business ", "days."])
    await socket.send_json_to({"type": "message", "message": "How long do refunds take?"})
    frames = await frames_until_end(socket)
    assert text_of(frames) == "Five business days."
    assert frames[-1]["type"] == "done" and frames[-1]["stored"]
    return frames[-1]


async def next_frame(socket: Any) -> dict[str, Any]:
    """The next frame that is not a ``conversation`` notice."""
    while True:
        frame = await socket.receive_json_from(timeout=5)
        if frame["type"] != "conversation":
            return frame


async def test_a_streamed_reply_is_rated_right_after_done(alice: Any, chain: Any) -> None:
    socket = await open_socket(alice)
    done = await streamed_reply(socket)
    reply = done["message_id"]

    await socket.send_json_to(
        {"type": "feedback", "message_id": reply, "value": False, "reason": "incomplete"}
    )
    ack = await next_frame(socket)
    assert (ack["type"], ack["message_id"], ack["key"]) == ("feedback", reply, "thumbs")
    score = ack["score"]
    assert (score["value"], score["reason"], score["source"]) == (False, "incomplete", "user")
    stored = await Score.objects.select_related("call_log").aget()
    assert stored.pk == score["id"] and stored.call_log is not None
    assert stored.call_log.trace_id == done["trace_id"]
    assert (stored.call_log.mode, stored.chain_slug) == ("stream", "support")

    # Change of mind, then undo with a null value.
    await socket.send_json_to({"type": "feedback", "message_id": reply, "value": "up"})
    changed = await next_frame(socket)
    assert (changed["score"]["id"], changed["score"]["value"]) == (score["id"], True)
    assert changed["score"]["reason"] == ""
    await socket.send_json_to({"type": "feedback", "message_id": reply, "value": None})
    undone = await next_frame(socket)
    assert undone == {"type": "feedback", "message_id": reply, "key": "thumbs", "score": None}
    assert not await Score.objects.aexists()
    await socket.disconnect()


async def test_the_done_frames_id_rates_the_reply_through_rest(alice: Any, chain: Any) -> None:
    socket = await open_socket(alice)
    done = await streamed_reply(socket)
    await socket.disconnect()
    api = await sync_to_async(client_for)(alice)
    url = f"/api/messages/{done['message_id']}/feedback/"
    response = await sync_to_async(api.put)(url, {"value": True}, format="json")
    assert response.status_code == 201, response.content
    log = await CallLog.objects.aget(trace_id=done["trace_id"])
    assert (await Score.objects.aget()).call_log_id == log.pk


async def test_refusals_are_error_frames_naming_the_feedback(
    alice: Any, bob: Any, chain: Any
) -> None:
    socket = await open_socket(alice)
    done = await streamed_reply(socket)
    reply = done["message_id"]

    intruder = await open_socket(bob)
    await intruder.send_json_to({"type": "feedback", "message_id": reply, "value": True})
    refused = await next_frame(intruder)
    assert (refused["type"], refused["code"], refused["in_reply_to"]) == (
        "error",
        "not_found",
        "feedback",
    )
    assert refused["message_id"] == reply
    await intruder.disconnect()

    question = await ChatMessage.objects.aget(message_type="user")
    await socket.send_json_to({"type": "feedback", "message_id": question.pk, "value": True})
    not_a_reply = await next_frame(socket)
    assert not_a_reply["errors"] == {"message_id": ["Only the assistant's replies can be rated."]}

    await socket.send_json_to({"type": "feedback", "message_id": "x", "value": 3, "mood": 1})
    malformed = await next_frame(socket)
    assert (malformed["code"], malformed["in_reply_to"], malformed["message_id"]) == (
        "invalid",
        "feedback",
        None,
    )
    assert set(malformed["errors"]) == {"message_id", "value", "mood"}
    assert not await Score.objects.aexists()
    await socket.disconnect()


async def test_a_vote_during_a_turn_leaves_the_turn_running(alice: Any, chain: Any) -> None:
    socket = await open_socket(alice)
    done = await streamed_reply(socket)
    await script("support", [f"w{i} " for i in range(30)], delay=0.02)
    await socket.send_json_to(
        {"type": "message", "message": "More?", "conversation_id": done["conversation_id"]}
    )
    assert (await next_frame(socket))["type"] == "start"
    await socket.send_json_to({"type": "feedback", "message_id": done["message_id"], "value": 9})
    await socket.send_json_to({"type": "feedback", "message_id": done["message_id"], "value": True})
    frames = [await next_frame(socket)]
    while frames[-1]["type"] != "done":
        frames.append(await next_frame(socket))
    acks = [f for f in frames if f["type"] == "feedback"]
    errors = [f for f in frames if f["type"] == "error"]
    assert len(acks) == 1 and acks[0]["score"]["value"] is True
    assert len(errors) == 1 and errors[0]["in_reply_to"] == "feedback"
    # Both were answered while the reply was still streaming, and it ended as usual.
    assert frames.index(acks[0]) < len(frames) - 2
    assert text_of(frames) == "".join(f"w{i} " for i in range(30))
    assert frames[-1]["reason"] == "complete"
    await socket.disconnect()
