"""ToolCallingAdvisor approval: a reply needing approval pauses the turn; decisions resume it."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    AssistantMessage,
    ChatClient,
    ChatClientResponseAccumulator,
    ScriptedChatModel,
    ToolCall,
    ToolCallDecision,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.advisors import ToolCallingAdvisor
from advisors_app.core.advisors.tool_calling import (
    APPROVAL_REQUIRED,
    PENDING_APPROVALS,
    RESUMED_ROUND,
)
from advisors_app.core.attributes import TOOL_APPROVAL_GRANTS, TOOL_CALL_DECISIONS
from advisors_app.core.exceptions import ToolCallLimitExceededError
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import (
    ToolCallConfirmationPolicy,
    ToolCallDecisionError,
    ToolCallingManager,
    tool,
)

MODES = ["call", "stream"]

ran: list[tuple[str, dict]] = []


@pytest.fixture(autouse=True)
def _clear_ran():
    ran.clear()


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    ran.append(("weather", {"city": city}))
    return f"sunny in {city}"


@tool(requires_approval=True)
def delete_note(note_id: int) -> str:
    """Delete one of the user's notes."""
    ran.append(("delete_note", {"note_id": note_id}))
    return f"deleted {note_id}"


@tool(requires_approval=lambda arguments: arguments.get("amount", 0) > 100)
def transfer(amount: int, to: str) -> str:
    """Transfer money."""
    ran.append(("transfer", {"amount": amount, "to": to}))
    return f"sent {amount} to {to}"


TOOLS = (weather, delete_note, transfer)


def client_for(model, manager=None):
    advisors = (ToolCallingAdvisor(manager),) if manager is not None else ()
    return ChatClient(model, default_advisors=advisors)


async def run(spec, mode):
    """The final ChatResponse of a call, or of a stream's aggregate."""
    if mode == "call":
        return await (await spec.acall()).achat_response()
    accumulator = ChatClientResponseAccumulator()
    async for chunk in spec.stream().chat_client_responses():
        accumulator.add(chunk)
    return accumulator.result().chat_response


def resume_spec(client, messages, decisions, **params):
    spec = client.prompt().messages(*messages).tools(*TOOLS)
    spec.advisor_param(TOOL_CALL_DECISIONS, decisions)
    for key, value in params.items():
        spec.advisor_param(key, value)
    return spec


@pytest.mark.parametrize("mode", MODES)
async def test_reply_with_one_approval_call_and_one_free_call_runs_neither(mode):
    model = ScriptedChatModel(
        [tool_call_response(("weather", {"city": "Paris"}), ("delete_note", {"note_id": 7}))]
    )
    spec = client_for(model).prompt("delete note 7").tools(*TOOLS)

    response = await run(spec, mode)

    assert ran == []
    assert len(model.prompts) == 1
    assert response.result.finish_reason == APPROVAL_REQUIRED
    assert [c.name for c in response.result.output.tool_calls] == ["weather", "delete_note"]
    assert [dict(p) for p in response.metadata[PENDING_APPROVALS]] == [
        {
            "approval_id": "call_2",
            "tool": "delete_note",
            "arguments": {"note_id": 7},
            "allowed_decisions": ["approve", "edit", "reject"],
            "reason": "Tool 'delete_note' requires approval before it runs.",
        }
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_calls_needing_no_approval_run_as_before(mode):
    model = ScriptedChatModel(
        [
            tool_call_response(
                ("weather", {"city": "Paris"}), ("transfer", {"amount": 5, "to": "bob"})
            ),
            "ok",
        ]
    )
    response = await run(client_for(model).prompt("go").tools(*TOOLS), mode)

    assert response.result.output.text == "ok"
    assert response.result.finish_reason != APPROVAL_REQUIRED
    assert PENDING_APPROVALS not in response.metadata
    assert RESUMED_ROUND not in response.metadata
    assert sorted(name for name, _ in ran) == ["transfer", "weather"]


@pytest.mark.parametrize("mode", MODES)
async def test_tool_predicate_pauses_only_matching_arguments(mode):
    model = ScriptedChatModel([tool_call_response(("transfer", {"amount": 500, "to": "bob"}))])
    response = await run(client_for(model).prompt("go").tools(*TOOLS), mode)

    assert response.result.finish_reason == APPROVAL_REQUIRED
    assert [p["tool"] for p in response.metadata[PENDING_APPROVALS]] == ["transfer"]
    assert ran == []


def paused_conversation():
    assistant = AssistantMessage(
        "",
        tool_calls=(
            ToolCall("call_1", "delete_note", '{"note_id": 1}'),
            ToolCall("call_2", "transfer", '{"amount": 500, "to": "bob"}'),
            ToolCall("call_3", "delete_note", '{"note_id": 3}'),
            ToolCall("call_4", "weather", '{"city": "Oslo"}'),
        ),
    )
    return [UserMessage("clean up and pay bob"), assistant]


@pytest.mark.parametrize("mode", MODES)
async def test_resume_with_approve_edit_reject_runs_as_decided_and_model_sees_results(mode):
    model = ScriptedChatModel(["all done"])
    decisions = [
        ToolCallDecision.approve("call_1"),
        {"approval_id": "call_2", "decision": "edit", "arguments": {"amount": 50, "to": "bob"}},
        ToolCallDecision.reject("call_3", "keep that one"),
    ]
    spec = resume_spec(client_for(model), paused_conversation(), decisions)

    response = await run(spec, mode)

    assert response.result.output.text == "all done"
    assert sorted(ran, key=lambda r: r[0]) == [
        ("delete_note", {"note_id": 1}),
        ("transfer", {"amount": 50, "to": "bob"}),
        ("weather", {"city": "Oslo"}),
    ]
    sent = model.prompts[0].instructions
    assistant, tool_message = sent[-2], sent[-1]
    # The model sees the call that ran: the edited arguments.
    assert assistant.tool_calls[1].arguments == '{"amount":50,"to":"bob"}'
    assert isinstance(tool_message, ToolResponseMessage)
    assert [(r.id, r.response_data) for r in tool_message.responses] == [
        ("call_1", "deleted 1"),
        ("call_2", "sent 50 to bob"),
        (
            "call_3",
            "The user rejected the call to tool 'delete_note'; it was not executed. "
            "Reason: keep that one",
        ),
        ("call_4", "sunny in Oslo"),
    ]
    # Whoever stores the conversation gets the round the decisions ran.
    assert tuple(response.metadata[RESUMED_ROUND]) == (assistant.to_dict(), tool_message.to_dict())


@pytest.mark.parametrize("mode", MODES)
async def test_resume_can_pause_again(mode):
    model = ScriptedChatModel([tool_call_response(("delete_note", {"note_id": 9}))])
    spec = resume_spec(
        client_for(model),
        paused_conversation(),
        [ToolCallDecision.reject(f"call_{n}") for n in (1, 2, 3)],
    )
    response = await run(spec, mode)

    assert ran == [("weather", {"city": "Oslo"})]
    assert response.result.finish_reason == APPROVAL_REQUIRED
    assert [p["arguments"] for p in response.metadata[PENDING_APPROVALS]] == [{"note_id": 9}]


@pytest.mark.parametrize("mode", MODES)
async def test_chain_policy_json_schema_condition(mode):
    policy = ToolCallConfirmationPolicy(
        {
            "weather": {
                "when": {"properties": {"city": {"const": "Moscow"}}, "required": ["city"]},
                "reason": "Sensitive city",
                "allowed_decisions": ["approve", "reject"],
            },
            "delete_note": "never",
        }
    )
    manager = ToolCallingManager(confirmation_policy=policy)
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "Oslo"}), ("delete_note", {"note_id": 1})),
            tool_call_response(("weather", {"city": "Moscow"})),
        ]
    )
    response = await run(client_for(model, manager).prompt("go").tools(*TOOLS), mode)

    assert sorted(name for name, _ in ran) == ["delete_note", "weather"]
    assert response.result.finish_reason == APPROVAL_REQUIRED
    assert [dict(p) for p in response.metadata[PENDING_APPROVALS]] == [
        {
            "approval_id": "call_1",
            "tool": "weather",
            "arguments": {"city": "Moscow"},
            "allowed_decisions": ["approve", "reject"],
            "reason": "Sensitive city",
        }
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_granted_tools_skip_approval(mode):
    model = ScriptedChatModel([tool_call_response(("delete_note", {"note_id": 2})), "done"])
    spec = client_for(model).prompt("go").tools(*TOOLS)
    spec.advisor_param(TOOL_APPROVAL_GRANTS, ["delete_note"])
    response = await run(spec, mode)

    assert response.result.output.text == "done"
    assert ran == [("delete_note", {"note_id": 2})]


@pytest.mark.parametrize("mode", MODES)
async def test_limits_still_enforced_on_resume(mode):
    manager = ToolCallingManager(max_identical_calls=1)
    model = ScriptedChatModel(["never reached"])
    earlier = AssistantMessage("", tool_calls=(ToolCall("a", "delete_note", '{"note_id": 1}'),))
    messages = [
        UserMessage("delete note 1"),
        earlier,
        ToolResponseMessage((ToolResponse("a", "delete_note", "deleted 1"),)),
        AssistantMessage("", tool_calls=(ToolCall("b", "delete_note", '{"note_id": 1}'),)),
    ]
    spec = resume_spec(client_for(model, manager), messages, [ToolCallDecision.approve("b")])

    response = await run(spec, mode)

    assert ran == []
    assert model.prompts == []
    assert response.result.finish_reason == ToolCallLimitExceededError.FINISH_REASON
    assistant, tool_message = response.metadata[RESUMED_ROUND]
    assert [c["id"] for c in assistant["tool_calls"]] == ["b"]
    assert "Identical tool call limit (1)" in str(tool_message)


@pytest.mark.parametrize("mode", MODES)
async def test_missing_decision_is_refused_before_anything_runs(mode):
    model = ScriptedChatModel(["never reached"])
    spec = resume_spec(
        client_for(model), paused_conversation(), [ToolCallDecision.approve("call_1")]
    )
    with pytest.raises(ToolCallDecisionError, match="no decision for pending call 'call_2'"):
        await run(spec, mode)
    assert ran == []


@pytest.mark.parametrize("mode", MODES)
async def test_decisions_without_a_paused_tool_call_message_are_refused(mode):
    model = ScriptedChatModel(["never reached"])
    spec = resume_spec(client_for(model), [UserMessage("hi")], [ToolCallDecision.approve("x")])
    with pytest.raises(ToolCallDecisionError, match="do not end with the assistant message"):
        await run(spec, mode)


async def test_stream_pause_after_streamed_preamble_does_not_repeat_the_text():
    model = ScriptedChatModel(
        [["Let me ", "delete it.", tool_call_response(("delete_note", {"note_id": 4}))]]
    )
    spec = client_for(model).prompt("go").tools(*TOOLS)
    chunks = [c async for c in spec.stream().chat_client_responses()]
    accumulator = ChatClientResponseAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    response = accumulator.result().chat_response

    assert response.result.output.text == "Let me delete it."
    assert response.result.finish_reason == APPROVAL_REQUIRED
    assert [c.name for c in response.result.output.tool_calls] == ["delete_note"]
    assert ran == []
