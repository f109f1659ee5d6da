"""Turns run chain versions: production by default, other labels and versions for staff, and
conversations that keep the version they started on."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import Permission
from django.test import Client

from advisors_app.definition import move_label, publish, rollback
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import PRODUCTION, AdvisorChain, CallLog, Conversation, VersionPolicy
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import DoneEvent, TurnError
from tests.factories import make_chain, scripted_model
from tests.test_consumers import open_socket

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
def staff(django_user_model: Any) -> Any:
    """Staff who may view chains: what choosing a version needs (advisors_app.turn.choose)."""
    sam = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    sam.user_permissions.add(Permission.objects.get(codename="view_advisorchain"))
    return sam


@pytest.fixture
def chain() -> AdvisorChain:
    """Version 1 answers "one" (production); version 2 answers "two" (published, unlabelled);
    the draft answers "draft"."""
    chain = make_chain("versioned", model=scripted_model("one", responses=("one",)))
    chain.chat_model = scripted_model("two", responses=("two",))
    chain.save()
    publish(chain, message="answers two")
    chain.chat_model = scripted_model("draft", responses=("draft",))
    chain.save()
    return chain


async def ask(user: Any, **kwargs: Any) -> Any:
    return await call_turn("versioned", user, "hi", **kwargs)


async def test_callers_get_production_and_staff_may_choose(
    chain: AdvisorChain, user: Any, staff: Any
) -> None:
    assert (await ask(user)).content == "one"
    result = await ask(staff, version=2)
    assert (result.content, result.version, result.to_dict()["version"]) == ("two", 2, 2)
    assert (await ask(staff, version="draft")).content == "draft"
    await sync_to_async(move_label)(chain, "staging", await chain.versions.aget(number=2))
    assert (await ask(staff, label="staging")).content == "two"
    logs = [log async for log in CallLog.objects.order_by("created")]
    assert [(log.chain_version_id is not None, log.label) for log in logs] == [
        (True, "production"),
        (True, ""),
        (False, "draft"),
        (True, "staging"),
    ]
    assert logs[0].config_hash == (await chain.versions.aget(number=1)).snapshot_hash


async def test_other_versions_are_for_staff_and_bad_choices_are_field_errors(
    chain: AdvisorChain, user: Any, staff: Any
) -> None:
    for choice in ({"version": 2}, {"version": "draft"}, {"label": "staging"}):
        with pytest.raises(TurnError) as refused:
            await ask(user, **choice)
        assert (refused.value.code, refused.value.http_status) == ("permission_denied", 403)
    assert (await ask(user, label=PRODUCTION)).content == "one"
    with pytest.raises(TurnError) as refused:
        await ask(staff, label="canary")
    assert (
        refused.value.http_status == 404 and "no label 'canary'" in refused.value.errors["label"][0]
    )
    with pytest.raises(TurnError) as refused:
        await ask(staff, version=9)
    assert refused.value.code == "version_not_found" and "version" in refused.value.errors
    for bad, field in (
        ({"version": 0}, "version"),
        ({"version": "2"}, "version"),
        ({"label": "Bad Label"}, "label"),
        ({"label": "x", "version": 1}, "version"),
    ):
        with pytest.raises(TurnError) as refused:
            await ask(staff, **bad)
        assert refused.value.http_status == 400 and field in refused.value.errors
    assert await Conversation.objects.acount() == 1  # only the production turn's


async def test_a_conversation_keeps_the_version_it_started_on(
    chain: AdvisorChain, user: Any
) -> None:
    first = await ask(user)
    assert first.content == "one"
    two = await chain.versions.aget(number=2)
    await sync_to_async(move_label)(chain, PRODUCTION, two, reason="ship two")
    assert (await ask(user, conversation_id=first.conversation_id)).content == "one"
    # Naming production, as anyone may, is naming nothing: the conversation keeps its version.
    named = await ask(user, conversation_id=first.conversation_id, label=PRODUCTION)
    assert named.content == "one"
    assert (await ask(user)).content == "two"  # a new conversation starts on the new version
    conversation = await Conversation.objects.aget(conversation_id__endswith=first.conversation_id)
    assert conversation.chain_version_id == (await chain.versions.aget(number=1)).pk
    await AdvisorChain.objects.filter(pk=chain.pk).aupdate(
        version_policy=VersionPolicy.FOLLOW_LABEL
    )
    assert (await ask(user, conversation_id=first.conversation_id)).content == "two"


async def test_streams_and_rollback(chain: AdvisorChain, user: Any, staff: Any) -> None:
    stream = await stream_turn("versioned", staff, "hi", version=2)
    events = [event async for event in stream]
    assert isinstance(events[-1], DoneEvent) and events[-1].content == "two"
    await sync_to_async(move_label)(chain, PRODUCTION, await chain.versions.aget(number=2))
    assert (await ask(user)).content == "two"
    await sync_to_async(rollback)(chain, PRODUCTION, reason="two was wrong")
    assert (await ask(user)).content == "one"


async def collect(parts: Any) -> bytes:
    return b"".join([part async for part in parts])


def sse_done(body: bytes) -> dict[str, Any]:
    blocks = body.decode().split("\n\n")
    events = [block for block in blocks if "event: done\n" in block + "\n"]
    return json.loads(events[-1].split("data: ", 1)[1])


def test_rest_call_and_sse_accept_label_and_version(
    chain: AdvisorChain, staff: Any, user: Any
) -> None:
    client = Client()
    client.force_login(staff)
    call = client.post(
        "/api/chains/versioned/call/",
        {"message": "hi", "version": 2},
        content_type="application/json",
    )
    assert call.status_code == 200 and call.json()["content"] == "two"
    assert call.json()["version"] == 2
    stream = client.post(
        "/api/chains/versioned/stream/",
        {"message": "hi", "version": "draft"},
        content_type="application/json",
    )
    assert stream.status_code == 200
    body = async_to_sync(collect)(stream.streaming_content)
    assert sse_done(body)["content"] == "draft"
    client.force_login(user)
    refused = client.post(
        "/api/chains/versioned/call/",
        {"message": "hi", "label": "staging"},
        content_type="application/json",
    )
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "permission_denied"


async def test_websocket_message_frames_accept_label_and_version(
    chain: AdvisorChain, staff: Any, user: Any
) -> None:
    socket = await open_socket(staff, "versioned")
    try:
        await socket.send_json_to({"type": "message", "text": "hi", "version": 2})
        frames = []
        while not frames or frames[-1]["type"] not in ("done", "error"):
            frames.append(await socket.receive_json_from(timeout=10))
        assert frames[-1]["type"] == "done" and frames[-1]["content"] == "two"
    finally:
        await socket.disconnect()
    socket = await open_socket(user, "versioned")
    try:
        await socket.send_json_to({"type": "message", "text": "hi", "label": "staging"})
        frame = await socket.receive_json_from(timeout=10)
        assert frame["type"] == "error" and frame["code"] == "permission_denied"
    finally:
        await socket.disconnect()


async def test_a_draft_that_does_not_pass_the_lint_is_the_callers_error(
    chain: AdvisorChain, staff: Any
) -> None:
    await chain.advisors.acreate(advisor_type="append", params={"text": 3})
    with pytest.raises(TurnError) as refused:
        await ask(staff, version="draft")
    assert (refused.value.code, refused.value.http_status) == ("invalid", 400)
    assert "E109" in refused.value.errors["version"][0]


async def test_the_start_event_says_which_version_runs(chain: AdvisorChain, staff: Any) -> None:
    stream = await stream_turn("versioned", staff, "hi", version=2)
    events = [event.to_dict() async for event in stream]
    assert events[0]["type"] == "start" and events[0]["version"] == 2
    stream = await stream_turn("versioned", staff, "hi", version="draft")
    events = [event.to_dict() async for event in stream]
    assert events[0]["version"] is None


async def test_traces_keep_payloads_only_when_asked_sampled_or_in_debug(
    chain: AdvisorChain, user: Any, settings: Any
) -> None:
    settings.DEBUG = False
    plain = await ask(user)
    assert all(entry["request"] is None for entry in plain.trace["entries"])
    asked = await ask(user, trace_payloads=True)
    assert asked.trace["entries"][0]["request"] is not None
    settings.ADVISORS = {"TRACE_PAYLOAD_SAMPLE": 1.0}
    assert (await ask(user)).trace["entries"][0]["request"] is not None
    settings.ADVISORS = {}
    settings.DEBUG = True
    assert (await ask(user)).trace["entries"][0]["request"] is not None
