"""Human approval of tool calls through the turn service and every transport (issue 19).

A chain whose tool needs approval pauses the turn (finish reason ``APPROVAL_REQUIRED``, nothing
runs, the tool-call message stored flagged pending, one ``ToolApproval`` row per waiting call);
``decisions`` resume it on REST call/stream and the websocket; refusals leave everything as it
was; a new message instead of a decision keeps the history valid.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth.models import Permission
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from advisors_app.approvals.pauses import record_decision
from advisors_app.core import ScriptedChatModel, ToolCall
from advisors_app.core.attributes import PRINCIPAL
from advisors_app.core.messages import ToolResponseMessage
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import ToolCallDecision, ToolContext, tool
from advisors_app.definition.runtime import load_chain
from advisors_app.definition.tools import tool_registry
from advisors_app.definition.versions import PublishError
from advisors_app.models import CallLog, ChatMessage, ToolApproval, ToolApprovalGrant
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import TurnError
from advisors_app.turn.input import TurnInput
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model
from tests.test_consumers import frames_until_end, open_socket

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache"),
]

saved: list[tuple[str, Any]] = []


@tool(name="save_memo", requires_approval=True)
def save_memo(text: str, context: ToolContext) -> str:
    """Save a memo for the user."""
    principal = context.get(PRINCIPAL)
    saved.append((text, getattr(principal, "username", None)))
    return f"saved {text}"


@tool(name="wire_money", requires_approval=lambda arguments: arguments.get("amount", 0) > 100)
def wire_money(amount: int) -> str:
    """Send money."""
    saved.append((f"wire {amount}", None))
    return f"sent {amount}"


@pytest.fixture(autouse=True)
def _tools() -> Iterator[None]:
    saved.clear()
    tool_registry.register(save_memo, replace=True)
    tool_registry.register(wire_money, replace=True)
    yield
    tool_registry.unregister("save_memo")
    tool_registry.unregister("wire_money")


@pytest.fixture
def alice(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def bob(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def memo_chain() -> Any:
    return make_chain(
        "memos",
        model=scripted_model("memo-model", responses=(), repeat=False),
        advisors=(("message_chat_memory", {"max_messages": 20}), ("tool_calling", {})),
        tools=["save_memo", "wire_money"],
    )


def build(slug: str, advisors: Any, tools: list[str]) -> ScriptedChatModel:
    """A chain ``slug`` on its own scripted model (blocking); the model, to script."""
    make_chain(
        slug,
        model=scripted_model(f"{slug}-model", responses=(), repeat=False),
        advisors=advisors,
        tools=tools,
    )
    return load_chain(slug).client.chat_model  # type: ignore[return-value]


def script(*items: Any) -> ScriptedChatModel:
    model: ScriptedChatModel = load_chain("memos").client.chat_model  # type: ignore[assignment]
    model.add(*items)
    return model


def memo_call(call_id: str = "m1", text: str = "milk") -> Any:
    return tool_call_response(ToolCall(call_id, "save_memo", json.dumps({"text": text})))


def kinds(conversation_public: str, user: Any) -> list[str]:
    rows = ChatMessage.objects.filter(conversation__owner=user).order_by("sequence")
    return [row.message_type for row in rows]


def stored_messages(user: Any) -> list[ChatMessage]:
    return list(ChatMessage.objects.filter(conversation__owner=user).order_by("sequence"))


# -- the service --------------------------------------------------------------------------------


async def test_a_call_pauses_runs_nothing_and_records_the_pending_call(
    memo_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)(memo_call())
    outcome = await call_turn("memos", alice, "Save a memo: milk")

    assert outcome.finish_reason == "APPROVAL_REQUIRED"
    assert saved == []
    [pending] = outcome.pending_approvals
    assert pending["approval_id"] == "m1" and pending["tool"] == "save_memo"
    assert pending["arguments"] == {"text": "milk"}
    assert pending["allowed_decisions"] == ["approve", "edit", "reject"]
    assert "requires approval" in pending["reason"] and pending["expires_at"]
    body = outcome.to_dict()
    assert body["pending_approvals"] == [pending]

    def check() -> None:
        user, call = stored_messages(alice)
        assert (user.message_type, call.message_type) == ("user", "assistant")
        assert call.metadata["approval_pending"] is True and call.pk == outcome.message_id
        row = ToolApproval.objects.get()
        assert (row.status, row.user, row.message_id) == ("pending", alice, call.pk)
        assert row.call_log == CallLog.objects.get()

    await sync_to_async(check)()


async def test_approve_resumes_runs_the_tool_once_and_stores_a_valid_history(
    memo_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)(memo_call(), "Saved your memo.")
    paused = await call_turn("memos", alice, "Save a memo: milk")
    decision = {"approval_id": "m1", "decision": "approve"}
    resumed = await call_turn(
        "memos",
        alice,
        TurnInput(None, paused.conversation_id, decisions=[decision]),
    )
    assert resumed.content == "Saved your memo."
    assert saved == [("milk", "alice")]
    assert [t["name"] for t in resumed.tools] == ["save_memo"]

    def check() -> None:
        messages = stored_messages(alice)
        assert [m.message_type for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[1].metadata["approval_pending"] is False
        assert messages[1].metadata["tool_call_decisions"] == [decision]
        assert messages[2].tool_responses[0]["response_data"] == "saved milk"
        row = ToolApproval.objects.get()
        assert (row.status, row.decided_by, row.decision) == ("approved", alice, "approve")
        assert row.resumed_call_log == CallLog.objects.order_by("-pk").first()

    await sync_to_async(check)()
    # Deciding again is refused: nothing waits any more.
    with pytest.raises(TurnError) as refused:
        await call_turn(
            "memos", alice, TurnInput(None, paused.conversation_id, decisions=[decision])
        )
    assert refused.value.errors["decisions"][0].startswith("This conversation has no tool calls")
    assert saved == [("milk", "alice")]


async def test_a_stream_pauses_with_an_approval_required_event_then_resumes(
    memo_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)(memo_call(), ["Saved ", "it."])
    stream = await stream_turn("memos", alice, "Save a memo: milk")
    events = [event.to_dict() async for event in stream]
    assert [e["type"] for e in events] == ["start", "approval_required", "done"]
    assert events[1]["approvals"][0]["approval_id"] == "m1"
    assert events[2]["finish_reason"] == "APPROVAL_REQUIRED"
    assert events[2]["pending_approvals"] == events[1]["approvals"]
    assert saved == []

    edit = {"approval_id": "m1", "decision": "edit", "arguments": {"text": "oat milk"}}
    stream = await stream_turn(
        "memos", alice, TurnInput(None, events[0]["conversation_id"], decisions=[edit])
    )
    events = [event.to_dict() async for event in stream]
    assert [e["type"] for e in events] == [
        *("start", "tool_call", "tool_result", "delta", "delta", "done"),
    ]
    assert saved == [("oat milk", "alice")]

    def check() -> None:
        messages = stored_messages(alice)
        assert [m.message_type for m in messages] == ["user", "assistant", "tool", "assistant"]
        # The stored call is the one that ran, so the model's history is true.
        assert json.loads(messages[1].tool_calls[0]["arguments"]) == {"text": "oat milk"}
        row = ToolApproval.objects.get()
        assert row.status == "edited" and row.decided_arguments == {"text": "oat milk"}
        assert row.arguments == {"text": "milk"}

    await sync_to_async(check)()


async def test_reject_sends_the_reason_to_the_model_and_runs_nothing(
    memo_chain: Any, alice: Any
) -> None:
    model = await sync_to_async(script)(memo_call(), "OK, I did not save it.")
    paused = await call_turn("memos", alice, "Save a memo: milk")
    reject = {"approval_id": "m1", "decision": "reject", "reason": "not now"}
    resumed = await call_turn(
        "memos", alice, TurnInput(None, paused.conversation_id, decisions=[reject])
    )
    assert resumed.content == "OK, I did not save it." and saved == []
    last = model.prompts[-1].instructions[-1]
    assert isinstance(last, ToolResponseMessage)
    assert "rejected" in last.responses[0].response_data
    assert "not now" in last.responses[0].response_data
    row = await ToolApproval.objects.aget()
    assert (row.status, row.decision_reason) == ("rejected", "not now")


async def test_a_new_message_instead_of_a_decision_keeps_the_history_valid(
    memo_chain: Any, alice: Any
) -> None:
    model = await sync_to_async(script)(memo_call(), "Something else then.")
    paused = await call_turn("memos", alice, "Save a memo: milk")
    answer = await call_turn("memos", alice, "Never mind", paused.conversation_id)
    assert answer.content == "Something else then." and saved == []
    sent = model.prompts[-1].instructions
    assert isinstance(sent[-2], ToolResponseMessage) and sent[-1].text == "Never mind"

    def check() -> None:
        messages = stored_messages(alice)
        assert [m.message_type for m in messages] == [
            *("user", "assistant", "tool", "user", "assistant"),
        ]
        assert "not executed" in messages[2].tool_responses[0]["response_data"]
        assert ToolApproval.objects.get().status == "expired"

    await sync_to_async(check)()


async def test_bad_decisions_are_refused_with_field_errors_and_change_nothing(
    memo_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)(memo_call())
    paused = await call_turn("memos", alice, "Save a memo: milk")
    conversation = paused.conversation_id
    cases = [
        ([{"approval_id": "nope", "decision": "approve"}], "not a call waiting"),
        ([{"approval_id": "m1", "decision": "maybe"}], "must be one of"),
        ([{"approval_id": "m1", "decision": "edit"}], "needs 'arguments'"),
        ([{"approval_id": "m1", "decision": "approve", "x": 1}], "Unknown keys"),
        ([], "non-empty list"),
    ]
    for decisions, expected in cases:
        with pytest.raises(TurnError) as refused:
            await call_turn("memos", alice, TurnInput(None, conversation, decisions=decisions))
        assert refused.value.code == "invalid"
        assert expected in " ".join(refused.value.errors["decisions"]), decisions
    with pytest.raises(TurnError) as refused:
        await call_turn("memos", alice, TurnInput.from_data({"message": "hi", "decisions": []}))
    assert "not both" in refused.value.errors["message"][0]
    with pytest.raises(TurnError) as refused:
        await call_turn(
            "memos",
            alice,
            TurnInput(None, None, decisions=[{"approval_id": "m1", "decision": "approve"}]),
        )
    assert "conversation_id" in refused.value.errors
    row = await ToolApproval.objects.aget()
    assert row.status == "pending" and saved == []


async def test_expired_and_foreign_approvals_are_refused(
    memo_chain: Any, alice: Any, bob: Any
) -> None:
    await sync_to_async(script)(memo_call())
    paused = await call_turn("memos", alice, "Save a memo: milk")
    approve = [{"approval_id": "m1", "decision": "approve"}]
    # Bob cannot reach Alice's conversation: ids are per owner.
    with pytest.raises(TurnError) as refused:
        await call_turn("memos", bob, TurnInput(None, paused.conversation_id, decisions=approve))
    assert refused.value.code == "invalid"
    await ToolApproval.objects.all().aupdate(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(TurnError) as refused:
        await call_turn("memos", alice, TurnInput(None, paused.conversation_id, decisions=approve))
    assert "expired" in refused.value.errors["decisions"][0]
    assert (await ToolApproval.objects.aget()).status == "expired" and saved == []


async def test_an_approver_permission_in_the_chain_restricts_who_decides(
    alice: Any, django_user_model: Any
) -> None:
    model = await sync_to_async(build)(
        "strict",
        (
            ("message_chat_memory", {}),
            ("tool_calling", {"approvers": "advisors_app.decide_toolapproval"}),
        ),
        ["save_memo"],
    )
    model.add(memo_call(), "done")
    paused = await call_turn("strict", alice, "Save a memo")
    approve = [{"approval_id": "m1", "decision": "approve"}]
    with pytest.raises(TurnError) as refused:
        await call_turn("strict", alice, TurnInput(None, paused.conversation_id, decisions=approve))
    assert refused.value.code == "permission_denied" and refused.value.http_status == 403
    permission = await Permission.objects.aget(codename="decide_toolapproval")
    await sync_to_async(alice.user_permissions.add)(permission)
    alice = await django_user_model.objects.aget(pk=alice.pk)  # permission cache
    resumed = await call_turn(
        "strict", alice, TurnInput(None, paused.conversation_id, decisions=approve)
    )
    assert resumed.content == "done" and saved == [("milk", "alice")]


async def test_a_call_under_the_condition_runs_and_one_over_it_pauses(
    memo_chain: Any, alice: Any
) -> None:
    small = tool_call_response(ToolCall("w1", "wire_money", '{"amount": 5}'))
    large = tool_call_response(ToolCall("w2", "wire_money", '{"amount": 500}'))
    await sync_to_async(script)(small, "sent 5", large)
    outcome = await call_turn("memos", alice, "send 5")
    assert outcome.content == "sent 5" and saved == [("wire 5", None)]
    paused = await call_turn("memos", alice, "send 500", outcome.conversation_id)
    assert paused.finish_reason == "APPROVAL_REQUIRED"
    assert saved == [("wire 5", None)]


async def test_a_chain_policy_condition_and_an_edit_into_a_refused_decision(alice: Any) -> None:
    policy = {
        "wire_money": {
            "when": {"properties": {"amount": {"minimum": 1000}}},
            "allowed_decisions": ["approve", "reject"],
            "reason": "Large transfers need a second pair of eyes.",
        },
        "save_memo": "never",
    }
    model = await sync_to_async(build)(
        "bank",
        (("message_chat_memory", {}), ("tool_calling", {"approval": policy})),
        ["save_memo", "wire_money"],
    )
    model.add(
        memo_call(),
        "memo saved",
        tool_call_response(ToolCall("w1", "wire_money", '{"amount": 5000}')),
    )
    first = await call_turn("bank", alice, "memo")
    assert first.content == "memo saved" and saved == [("milk", "alice")]  # "never"
    paused = await call_turn("bank", alice, "wire", first.conversation_id)
    [pending] = paused.pending_approvals
    assert pending["reason"] == "Large transfers need a second pair of eyes."
    assert pending["allowed_decisions"] == ["approve", "reject"]
    edit = [{"approval_id": "w1", "decision": "edit", "arguments": {"amount": 1}}]
    with pytest.raises(TurnError) as refused:
        await call_turn("bank", alice, TurnInput(None, paused.conversation_id, decisions=edit))
    assert "not allowed" in refused.value.errors["decisions"][0]
    assert (await ToolApproval.objects.aget()).status == "pending"


async def test_a_grant_skips_approval_until_revoked(memo_chain: Any, alice: Any) -> None:
    await sync_to_async(script)(
        memo_call("m1", "one"),
        "saved one",
        memo_call("m2", "two"),
        "saved two",
        memo_call("m3", "three"),
    )
    paused = await call_turn("memos", alice, "memo one")
    conversation = paused.conversation_id
    grant = [{"approval_id": "m1", "decision": "approve", "grant": True}]
    await call_turn("memos", alice, TurnInput(None, conversation, decisions=grant))
    second = await call_turn("memos", alice, "memo two", conversation)
    assert second.content == "saved two" and second.finish_reason != "APPROVAL_REQUIRED"
    assert [text for text, _ in saved] == ["one", "two"]
    await ToolApprovalGrant.objects.all().aupdate(revoked_at=timezone.now())
    third = await call_turn("memos", alice, "memo three", conversation)
    assert third.finish_reason == "APPROVAL_REQUIRED"
    assert [text for text, _ in saved] == ["one", "two"]


async def test_a_chain_that_may_pause_needs_memory_before_the_loop(alice: Any) -> None:
    # Publishing compiles the chain: the version is refused with the reason.
    with pytest.raises(PublishError, match="message_chat_memory advisor ordered before"):
        await sync_to_async(build)("forgetful", (("tool_calling", {}),), ["save_memo"])


# -- REST and SSE -------------------------------------------------------------------------------


def test_rest_call_and_sse_stream_pause_and_resume(memo_chain: Any, alice: Any) -> None:
    script(memo_call("m1"), "Saved.", memo_call("m2", "eggs"), ["Re", "jected."])
    client = APIClient()
    client.force_authenticate(alice)
    paused = client.post("/api/chains/memos/call/", {"message": "Save a memo: milk"}, format="json")
    assert paused.status_code == 200, paused.content
    body = paused.json()
    assert body["finish_reason"] == "APPROVAL_REQUIRED"
    assert body["pending_approvals"][0]["approval_id"] == "m1"
    conversation = body["conversation_id"]
    bad = client.post(
        "/api/chains/memos/call/",
        {"conversation_id": conversation, "decisions": [{"approval_id": "m1"}]},
        format="json",
    )
    assert bad.status_code == 400 and "decisions" in bad.json()["error"]["fields"]
    resumed = client.post(
        "/api/chains/memos/call/",
        {
            "conversation_id": conversation,
            "decisions": [{"approval_id": "m1", "decision": "approve"}],
        },
        format="json",
    )
    assert resumed.status_code == 200, resumed.content
    assert resumed.json()["content"] == "Saved." and saved == [("milk", "alice")]

    response = client.post(
        "/api/chains/memos/stream/",
        {"message": "another: eggs", "conversation_id": conversation},
        format="json",
    )
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events] == ["start", "approval_required", "done"]
    response = client.post(
        "/api/chains/memos/stream/",
        {
            "conversation_id": conversation,
            "decisions": [{"approval_id": "m2", "decision": "reject"}],
        },
        format="json",
    )
    events = parse_sse(read_stream(response))
    assert [kind for kind, _ in events][-1] == "done"
    assert events[-1][1]["content"] == "Rejected." and saved == [("milk", "alice")]


def test_rest_lists_the_callers_pending_approvals_only(
    memo_chain: Any, alice: Any, bob: Any
) -> None:
    script(memo_call("m1"), memo_call("m2"))
    client = APIClient()
    client.force_authenticate(alice)
    client.post("/api/chains/memos/call/", {"message": "memo"}, format="json")
    client.force_authenticate(bob)
    client.post("/api/chains/memos/call/", {"message": "memo"}, format="json")
    client.force_authenticate(alice)
    listed = client.get("/api/approvals/?status=pending")
    assert listed.status_code == 200, listed.content
    [item] = listed.json()["results"]
    assert item["approval_id"] == "m1" and item["tool"] == "save_memo"
    assert item["conversation_id"] and item["status"] == "pending"
    assert client.get("/api/approvals/?status=bogus").status_code == 400


# -- websocket ----------------------------------------------------------------------------------


async def test_websocket_pauses_and_resumes(memo_chain: Any, alice: Any) -> None:
    await sync_to_async(script)(memo_call(), ["Saved ", "it."])
    socket = await open_socket(alice, "memos")
    try:
        await socket.send_json_to({"type": "message", "message": "Save a memo: milk"})
        frames = await frames_until_end(socket)
        assert [f["type"] for f in frames] == ["start", "approval_required", "done"]
        conversation = frames[0]["conversation_id"]
        await socket.send_json_to({"type": "message", "decisions": []})
        [error] = await frames_until_end(socket)
        assert error["type"] == "error" and "decisions" in error["errors"]
        await socket.send_json_to(
            {
                "type": "message",
                "conversation_id": conversation,
                "decisions": [{"approval_id": "m1", "decision": "approve"}],
            }
        )
        frames = await frames_until_end(socket)
        assert frames[-1]["type"] == "done" and frames[-1]["content"] == "Saved it."
        assert "tool_result" in [f["type"] for f in frames]
    finally:
        await socket.disconnect()
    assert saved == [("milk", "alice")]


async def test_malformed_decisions_are_field_errors_not_server_errors(
    memo_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)(memo_call())
    paused = await call_turn("memos", alice, "Save a memo: milk")
    conversation = paused.conversation_id
    cases = [
        ({"decision": "edit", "arguments": [1, 2]}, "JSON object"),
        ({"decision": "edit", "arguments": 5}, "JSON object"),
        ({"decision": "edit", "arguments": ["ab"]}, "JSON object"),
        ({"decision": "edit", "arguments": '{"text": "x"}'}, "JSON object"),
        ({"decision": "edit", "arguments": {"text": "x" * 20_000}}, "exceed"),
        ({"decision": "edit", "arguments": {"text": "a\x00b"}}, "arguments.text"),
        ({"decision": "approve", "arguments": {"text": "sneaky"}}, "edit only"),
        ({"decision": "approve", "reason": "why"}, "reject only"),
        ({"decision": "reject", "reason": "a\x00b"}, "reason"),
        ({"decision": "reject", "reason": "x" * 2001}, "2000"),
    ]
    for extra, expected in cases:
        decisions = [{"approval_id": "m1", **extra}]
        with pytest.raises(TurnError) as refused:
            await call_turn("memos", alice, TurnInput(None, conversation, decisions=decisions))
        assert refused.value.code == "invalid", extra
        assert expected in " ".join(refused.value.errors["decisions"]), extra
    row = await ToolApproval.objects.aget()
    assert row.status == "pending" and saved == []


async def test_the_owner_cannot_override_an_approvers_recorded_decision(
    alice: Any, django_user_model: Any
) -> None:
    model = await sync_to_async(build)(
        "guarded",
        (
            ("message_chat_memory", {}),
            ("tool_calling", {"approvers": "advisors_app.decide_toolapproval"}),
        ),
        ["save_memo"],
    )
    model.add(memo_call(), "done")
    paused = await call_turn("guarded", alice, "Save a memo")
    approver = await django_user_model.objects.acreate(username="carol", is_staff=True)
    permission = await Permission.objects.aget(codename="decide_toolapproval")
    await sync_to_async(approver.user_permissions.add)(permission)
    approver = await django_user_model.objects.aget(pk=approver.pk)
    row = await ToolApproval.objects.aget()
    reject = ToolCallDecision.reject("m1", "Denied by approver.")
    assert await sync_to_async(record_decision)(row, approver, reject) is True
    approve = [{"approval_id": "m1", "decision": "approve"}]
    with pytest.raises(TurnError) as refused:
        await call_turn(
            "guarded", alice, TurnInput(None, paused.conversation_id, decisions=approve)
        )
    assert refused.value.code == "conflict" and "carol decided" in refused.value.message
    assert saved == []
    row = await ToolApproval.objects.select_related("decided_by").aget()
    assert (row.status, row.decision, row.decided_by) == ("pending", "reject", approver)
    # Nor send it as recorded: alice may not decide it, so only the worker's resume runs it
    # (issue 36; tests/test_approvals_grants.py).
    as_recorded = [{"approval_id": "m1", "decision": "reject", "reason": "Denied by approver."}]
    with pytest.raises(TurnError) as refused:
        await call_turn(
            "guarded", alice, TurnInput(None, paused.conversation_id, decisions=as_recorded)
        )
    assert refused.value.code == "permission_denied" and "carol decided" in refused.value.message
    row = await ToolApproval.objects.select_related("decided_by").aget()
    assert (row.status, row.decided_by) == ("pending", approver) and saved == []


async def test_record_decision_refuses_what_a_resume_would_refuse(
    memo_chain: Any, alice: Any
) -> None:
    await sync_to_async(script)(memo_call())
    await call_turn("memos", alice, "Save a memo: milk")
    row = await ToolApproval.objects.aget()
    for decision in (
        ToolCallDecision.reject("m1", "x" * 5000),
        ToolCallDecision.reject("m1", "a\x00b"),
    ):
        with pytest.raises(ValueError):
            await sync_to_async(record_decision)(row, alice, decision)
    row = await ToolApproval.objects.aget()
    assert row.decided_at is None and row.decision == ""


def test_a_reopened_conversation_offers_no_card_once_the_approval_expired(
    memo_chain: Any, alice: Any
) -> None:
    script(memo_call())
    paused = async_to_sync(call_turn)("memos", alice, "Save a memo: milk")
    client = Client()
    client.force_login(alice)
    page = client.get(f"/chat/c/{paused.conversation_id}/")
    assert page.status_code == 200
    [waiting] = [m for m in page.context["messages"] if m["details"].get("pending_approvals")]
    assert waiting["details"]["pending_approvals"][0]["approval_id"] == "m1"
    ToolApproval.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    page = client.get(page.request["PATH_INFO"])
    assert not [m for m in page.context["messages"] if m["details"].get("pending_approvals")]
