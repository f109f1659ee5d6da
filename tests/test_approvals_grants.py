"""A grant needs the right to decide (issue 36): on a chain whose ``tool_calling`` names
``approvers``, the conversation's owner cannot ride an approver's recorded decision.

The race the issue found: an approver records a decision (``POST /api/approvals/<id>/decision/``
queues the resume), and before the worker runs it the owner re-sends that decision in a turn
with ``"grant": true`` — which used to claim the calls and create a ``ToolApprovalGrant`` for
the owner, so the tool never asked again. The worker is held here: it runs the queued resume in
a thread of its own and a ``choose`` hook stops it on an event as its turn opens (the rows read
pending, nothing claimed), so the owner's attempts land in the window every time, with no
sleep; then the test releases it. Every transport (REST call, SSE stream,
websocket) refuses them with 403 ``permission_denied`` and creates nothing; each refused
attempt counts against the chat rate (429 once it is used up); the worker's resume then runs
the approver's decision, and the tool still needs approval afterwards. An owner who may decide
(the approver permission) still grants as before. MCP cannot resume a turn at all.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.core.cache import cache
from django.db import connections, transaction

from advisors_app.approvals.pauses import claim
from advisors_app.core.tools import ToolCallDecision
from advisors_app.definition.tools import tool_registry
from advisors_app.exceptions import TurnError
from advisors_app.mcp_server import stop_endpoints
from advisors_app.models import ToolApproval, ToolApprovalGrant
from advisors_app.turn import Stage, TurnInput, add_hook, call_turn, remove_hook
from advisors_app.turn.input import Decision
from tests.api.conftest import client_for
from tests.api.views.test_chat import parse_sse, read_stream
from tests.mcp_server.conftest import token_of
from tests.mcp_server.test_asgi import in_process
from tests.task_worker import run_queued_tasks
from tests.test_approvals import build, memo_call, save_memo, saved
from tests.test_consumers import frames_until_end, open_socket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache"),
]

APPROVER_PERMISSION = "advisors_app.decide_toolapproval"
TRANSPORTS = ("call", "stream", "websocket")


@pytest.fixture(autouse=True)
def _memo_tool() -> Iterator[None]:
    saved.clear()
    tool_registry.register(save_memo, replace=True)
    yield
    tool_registry.unregister("save_memo")


@pytest.fixture(autouse=True)
def _fresh_rates() -> Iterator[None]:
    """Chat-rate histories never leak between tests (they live in the default cache)."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def guarded() -> Any:
    """A chain only holders of the approver permission may decide; its scripted model."""
    return build(
        "guarded",
        (
            ("message_chat_memory", {"max_messages": 20}),
            ("tool_calling", {"approvers": APPROVER_PERMISSION}),
        ),
        ["save_memo"],
    )


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def carol(django_user_model: Any) -> Any:
    """The approver."""
    user = django_user_model.objects.create_user("carol", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="decide_toolapproval"))
    return user


def approve_as(user: Any) -> Any:
    """``user`` approves the one pending call outside the turn (the approvals API); queued."""
    row = ToolApproval.objects.get(status="pending")
    return client_for(user).post(
        f"/api/approvals/{row.pk}/decision/", {"decision": "approve"}, format="json"
    )


@contextmanager
def worker_held() -> Iterator[list[int]]:
    """The approvals worker running the queued resume in a thread of its own, stopped as its
    turn opens until the block ends; then it finishes, and the list holds how many tasks ran."""
    entered, release, ran = threading.Event(), threading.Event(), []

    def hold(choice: Any) -> Any:
        if threading.current_thread() is worker:  # the owner's own turns are not held
            entered.set()
            assert release.wait(timeout=60)
        return choice

    def work() -> None:
        try:
            ran.append(run_queued_tasks())
        finally:
            connections.close_all()  # the thread's own connection

    worker = threading.Thread(target=work, name="approvals-worker")
    add_hook(Stage.CHOOSE, hold)
    worker.start()
    try:
        assert entered.wait(timeout=60), "the worker never opened its resume"
        yield ran
    finally:
        release.set()
        worker.join(timeout=60)
        remove_hook(Stage.CHOOSE, hold)
    assert not worker.is_alive()


def _rest(kind: str, user: Any, body: dict[str, Any]) -> dict[str, Any]:
    """A REST ``call`` or SSE ``stream`` turn; ``{"status", "code", "message", "kinds"}``."""
    response = client_for(user).post(f"/api/chains/guarded/{kind}/", body, format="json")
    if response.status_code != 200:
        error = response.json()["error"]
        return {"status": response.status_code, "code": error["code"], "message": error["message"]}
    if kind == "call":
        return {"status": 200, "code": None, "finish": response.json()["finish_reason"]}
    events = parse_sse(read_stream(response))
    return {"status": 200, "code": None, "finish": events[-1][1].get("finish_reason")}


async def send_turn(transport: str, user: Any, body: dict[str, Any]) -> dict[str, Any]:
    """One turn of ``user`` on ``transport``, reduced to what the tests compare."""
    if transport != "websocket":
        return await sync_to_async(_rest)(transport, user, body)
    socket = await open_socket(user, "guarded")
    try:
        await socket.send_json_to({"type": "message", **body})
        last = (await frames_until_end(socket))[-1]
    finally:
        await socket.disconnect()
    if last["type"] == "error":
        return {"status": None, "code": last["code"], "message": last["message"]}
    return {"status": None, "code": None, "finish": last.get("finish_reason")}


def grant_body(conversation: str) -> dict[str, Any]:
    """The owner's replay of the approver's decision, asking for a grant."""
    decision = {"approval_id": "m1", "decision": "approve", "grant": True}
    return {"conversation_id": conversation, "decisions": [decision]}


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_owner_cannot_grant_themselves_a_tool_past_the_approver(
    guarded: Any, alice: Any, carol: Any, transport: str
) -> None:
    guarded.add(memo_call("m1", "one"), "saved one", memo_call("m2", "two"))
    paused = await call_turn("guarded", alice, "memo one")
    conversation = paused.conversation_id
    queued = await sync_to_async(approve_as)(carol)
    assert queued.status_code == 202, queued.content

    with worker_held() as ran:
        for _ in range(3):  # the attacker retried: every attempt is refused alike
            refused = await send_turn(transport, alice, grant_body(conversation))
            assert refused["code"] == "permission_denied", refused
            assert refused["status"] in (403, None)  # None: a websocket error frame
            assert "may not decide" in refused["message"]
        # The replay without a grant is refused too: the decision is carol's to send.
        plain = grant_body(conversation)
        del plain["decisions"][0]["grant"]
        assert (await send_turn(transport, alice, plain))["code"] == "permission_denied"

        assert not await ToolApprovalGrant.objects.aexists()
        row = await ToolApproval.objects.select_related("decided_by").aget()
        assert (row.status, row.decided_by) == ("pending", carol)  # untouched, still carol's
        assert saved == []

    # The worker, released, resumed from carol's decision for alice.
    assert ran == [1] and saved == [("one", "alice")]
    assert (await ToolApproval.objects.aget(approval_id="m1")).status == "approved"
    # The next call of the tool still waits for an approver.
    later = await send_turn(transport, alice, {"conversation_id": conversation, "message": "two"})
    assert later["finish"] == "APPROVAL_REQUIRED"
    assert saved == [("one", "alice")]
    assert not await ToolApprovalGrant.objects.aexists()


async def test_an_owner_who_may_decide_still_grants(
    guarded: Any, alice: Any, carol: Any, django_user_model: Any
) -> None:
    """The right to decide is the right to grant: an owner holding the approver permission
    grants (even on a decision carol recorded first), and the tool stops asking."""
    await sync_to_async(alice.user_permissions.add)(
        await Permission.objects.aget(codename="decide_toolapproval")
    )
    alice = await django_user_model.objects.aget(pk=alice.pk)  # a fresh permission cache
    guarded.add(memo_call("m1", "one"), "saved one", memo_call("m2", "two"), "saved two")
    paused = await call_turn("guarded", alice, "memo one")
    conversation = paused.conversation_id
    assert (await sync_to_async(approve_as)(carol)).status_code == 202
    replay = TurnInput(None, conversation, decisions=grant_body(conversation)["decisions"])
    resumed = await call_turn("guarded", alice, replay)
    assert resumed.content == "saved one"
    grant = await ToolApprovalGrant.objects.select_related("granted_by").aget()
    assert (grant.tool, grant.granted_by) == ("save_memo", alice)
    second = await call_turn("guarded", alice, "memo two", conversation)
    assert second.content == "saved two" and second.finish_reason != "APPROVAL_REQUIRED"
    assert saved == [("one", "alice"), ("two", "alice")]
    # The worker finds the calls resumed already.
    assert await sync_to_async(run_queued_tasks)() == 1
    assert saved == [("one", "alice"), ("two", "alice")]


@pytest.fixture
def four_turns_an_hour(settings: Any) -> None:
    """A chat rate of 4 turns an hour (set before the chain is built: a settings change
    clears the built chains, and with them the test's scripted model)."""
    settings.ADVISORS = {**getattr(settings, "ADVISORS", {}), "CHAT_THROTTLE_RATE": "4/hour"}


async def test_claim_writes_no_grant_for_a_caller_who_may_not_decide(
    guarded: Any, alice: Any
) -> None:
    """Where the grant is written, the right is checked again: ``claim`` on its own (no
    ``open_resume`` before it) refuses, and its transaction leaves the call pending."""
    guarded.add(memo_call("m1", "one"))
    await call_turn("guarded", alice, "memo one")

    def attempt() -> TurnError:
        rows = list(ToolApproval.objects.select_related("message"))
        asked = (Decision(ToolCallDecision.approve("m1"), grant=True),)
        with pytest.raises(TurnError) as refused, transaction.atomic():
            claim(alice, rows, asked)
        return refused.value

    refused = await sync_to_async(attempt)()
    assert (refused.code, refused.http_status) == ("permission_denied", 403)
    assert not await ToolApprovalGrant.objects.aexists()
    assert (await ToolApproval.objects.aget()).status == "pending"


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_refused_resumes_count_against_the_chat_rate(
    four_turns_an_hour: None, guarded: Any, alice: Any, carol: Any, transport: str
) -> None:
    """Counted, not timed: with a rate of 4 turns an hour the pause is the first turn, the
    next three refused resumes the others, and the fifth attempt is throttled."""
    guarded.add(memo_call("m1", "one"))
    paused = await call_turn("guarded", alice, "memo one")
    assert (await sync_to_async(approve_as)(carol)).status_code == 202
    body = grant_body(paused.conversation_id)
    answers = [await send_turn(transport, alice, body) for _ in range(5)]
    codes = [answer["code"] for answer in answers]
    assert codes == ["permission_denied"] * 3 + ["throttled"] * 2
    if transport != "websocket":
        assert [answer["status"] for answer in answers] == [403] * 3 + [429] * 2
    assert not await ToolApprovalGrant.objects.aexists() and saved == []


@pytest.fixture
async def mcp_on(settings: Any) -> Any:
    """The MCP endpoint on (set before the chain is built, as above); stopped with the loop."""
    settings.ADVISORS = {**getattr(settings, "ADVISORS", {}), "MCP_ENDPOINT_ENABLED": True}
    yield
    await stop_endpoints()


async def test_mcp_cannot_resume_so_it_cannot_grant(
    mcp_on: None, guarded: Any, alice: Any, carol: Any
) -> None:
    """The chain tools take ``message``, ``conversation_id`` and ``params`` only: decisions,
    with or without a grant, are an unknown argument, refused before any turn."""
    guarded.add(memo_call("m1", "one"))
    paused = await call_turn("guarded", alice, "memo one")
    assert (await sync_to_async(approve_as)(carol)).status_code == 202
    arguments = {"message": "go on", **grant_body(paused.conversation_id)}
    token = await sync_to_async(token_of)(alice)
    result = await in_process(token, lambda s: s.call_tool("ask_guarded", arguments))
    assert result.is_error and result.structured_content["code"] == "invalid"
    assert result.structured_content["errors"] == {"decisions": ["Unknown field."]}
    assert not await ToolApprovalGrant.objects.aexists() and saved == []
    assert (await ToolApproval.objects.aget()).status == "pending"
