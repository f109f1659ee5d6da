"""Tool approval: declarations, the policy, decisions and the manager's pause and resume."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    AssistantMessage,
    Prompt,
    ToolCallingChatOptions,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.messages import ToolCall
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import (
    ApprovalDecision,
    ToolApprovalRequiredError,
    ToolCallConfirmationPolicy,
    ToolCallDecision,
    ToolCallDecisionError,
    ToolCallingManager,
    tool,
)

ran: list[str] = []


@pytest.fixture(autouse=True)
def _clear_ran():
    ran.clear()


@tool
def lookup(key: str) -> str:
    """Read a value."""
    ran.append(f"lookup {key}")
    return key.upper()


@tool(requires_approval=True)
def wipe(path: str) -> str:
    """Delete a path."""
    ran.append(f"wipe {path}")
    return f"wiped {path}"


def _boom(arguments):
    raise RuntimeError("predicate bug")


@tool(requires_approval=_boom)
def fragile(x: int) -> int:
    """A tool whose predicate fails."""
    return x


def prompt(*messages, tools=(lookup, wipe)):
    return Prompt(messages or (UserMessage("go"),), ToolCallingChatOptions(tool_callbacks=tools))


def call(name, arguments, id="c1"):
    return ToolCall(id, name, arguments)


# -- declarations ------------------------------------------------------------------------------


def test_tool_declares_approval_with_a_flag_or_a_predicate():
    @tool(requires_approval=lambda a: a["n"] > 2)
    def big(n: int) -> int:
        """Big."""
        return n

    assert wipe.requires_approval_for({"path": "/"}) is True
    assert lookup.requires_approval_for({"key": "k"}) is False
    assert big.requires_approval_for({"n": 3}) is True
    assert big.requires_approval_for({"n": 1}) is False
    # Arguments that are not a JSON object, or a failing predicate: approval (fail closed).
    assert big.requires_approval_for(None) is True
    assert fragile.requires_approval_for({"x": 1}) is True


def test_requires_approval_must_be_bool_or_callable():
    with pytest.raises(TypeError, match="requires_approval"):
        tool(requires_approval="yes")(lambda: None)


# -- policy ------------------------------------------------------------------------------------


def test_default_policy_follows_the_tools_declarations():
    policy = ToolCallConfirmationPolicy()
    assert policy.requirement(call("lookup", '{"key": "a"}'), lookup) is None
    requirement = policy.requirement(call("wipe", '{"path": "/"}'), wipe)
    assert requirement is not None
    assert requirement.allowed_decisions == ("approve", "edit", "reject")
    assert requirement.reason == "Tool 'wipe' requires approval before it runs."


def test_policy_rules_always_never_and_json_schema_condition():
    policy = ToolCallConfirmationPolicy.from_params(
        {
            "lookup": "always",
            "wipe": "never",
            "pay": {
                "when": {
                    "type": "object",
                    "properties": {"amount": {"type": "number", "minimum": 1000}},
                    "required": ["amount"],
                },
                "reason": "Payments of 1000 or more need a second pair of eyes.",
                "allowed_decisions": ["approve", "reject"],
            },
        }
    )
    assert policy.tool_names == {"lookup", "wipe", "pay"}
    assert policy.requirement(call("lookup", "{}"), lookup) is not None
    assert policy.requirement(call("wipe", '{"path": "/"}'), wipe) is None  # overrides the tool
    assert policy.requirement(call("pay", '{"amount": 10}'), None) is None
    assert policy.requirement(call("pay", "{}"), None) is None
    big = policy.requirement(call("pay", '{"amount": 1000}'), None)
    assert big is not None
    assert big.reason == "Payments of 1000 or more need a second pair of eyes."
    assert big.allowed_decisions == ("approve", "reject")
    # Arguments that are not a JSON object cannot be checked: approval.
    assert policy.requirement(call("pay", "not json"), None) is not None


def test_empty_schema_condition_matches_every_call():
    policy = ToolCallConfirmationPolicy({"lookup": {"when": {}}})
    assert policy.requirement(call("lookup", '{"key": "x"}'), lookup) is not None


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"t": "sometimes"}, "approval rule for tool 't' must be 'always', 'never'"),
        ({"t": {"if": {}}}, "approval rule for tool 't' must be"),
        ({"t": {"when": {"type": "nope"}}}, "'when' is not a valid JSON Schema"),
        ({"t": {"when": {}, "extra": 1}}, "unknown keys"),
        ({"t": {"when": {}, "allowed_decisions": ["maybe"]}}, "'allowed_decisions'"),
        ({"t": {"when": {}, "allowed_decisions": []}}, "'allowed_decisions'"),
        ({"t": {"when": {}, "reason": 3}}, "'reason' must be a string"),
        (["t"], "approval rules must be an object"),
    ],
)
def test_bad_rules_fail_at_construction_naming_the_tool(rules, message):
    with pytest.raises(ValueError, match=message):
        ToolCallConfirmationPolicy(rules)


# -- decisions ---------------------------------------------------------------------------------


def test_decision_round_trips_the_rest_shape():
    edit = ToolCallDecision.from_dict(
        {"approval_id": "c1", "decision": "edit", "arguments": {"b": 1, "a": 2}}
    )
    assert edit.decision is ApprovalDecision.EDIT
    assert edit.arguments == '{"a":2,"b":1}'
    assert edit.to_dict() == {
        "approval_id": "c1",
        "decision": "edit",
        "arguments": {"a": 2, "b": 1},
    }
    reject = ToolCallDecision("c2", "reject", reason="no")
    assert reject.to_dict() == {"approval_id": "c2", "decision": "reject", "reason": "no"}
    assert ToolCallDecision.approve("c3") == ToolCallDecision("c3", "approve")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"approval_id": "c1", "decision": "maybe"}, "must be one of approve, edit, reject"),
        ({"approval_id": "c1", "decision": "edit"}, "needs 'arguments'"),
        ({"approval_id": "c1", "decision": "edit", "arguments": "[1]"}, "must be a JSON object"),
        ({"approval_id": "", "decision": "approve"}, "approval_id"),
        ({"decision": "approve"}, "needs 'approval_id' and 'decision'"),
    ],
)
def test_bad_decisions_are_refused(data, message):
    with pytest.raises(ToolCallDecisionError, match=message):
        ToolCallDecision.from_dict(data)


# -- manager -----------------------------------------------------------------------------------


async def test_manager_pauses_before_any_call_runs():
    manager = ToolCallingManager()
    reply = tool_call_response(("lookup", {"key": "a"}), ("wipe", {"path": "/tmp"}))
    with pytest.raises(ToolApprovalRequiredError) as caught:
        await manager.execute_tool_calls(prompt(), reply)
    assert ran == []
    pause = caught.value
    assert [p.to_dict() for p in pause.pending] == [
        {
            "approval_id": "call_2",
            "tool": "wipe",
            "arguments": {"path": "/tmp"},
            "allowed_decisions": ["approve", "edit", "reject"],
            "reason": "Tool 'wipe' requires approval before it runs.",
        }
    ]
    assert isinstance(pause.history[-1], AssistantMessage)
    assert pause.history[-1].tool_calls == reply.result.output.tool_calls


async def test_manager_runs_decided_calls_and_the_free_ones():
    manager = ToolCallingManager()
    reply = tool_call_response(
        ("lookup", {"key": "a"}), ("wipe", {"path": "/tmp"}), ("wipe", {"path": "/"})
    )
    result = await manager.execute_tool_calls(
        prompt(),
        reply,
        decisions=[
            ToolCallDecision.edit("call_2", {"path": "/tmp/x"}),
            {"approval_id": "call_3", "decision": "reject"},
        ],
    )
    assert sorted(ran) == ["lookup a", "wipe /tmp/x"]
    tool_message = result.conversation_history[-1]
    assert isinstance(tool_message, ToolResponseMessage)
    assert [r.response_data for r in tool_message.responses] == [
        "A",
        "wiped /tmp/x",
        "The user rejected the call to tool 'wipe'; it was not executed.",
    ]
    assert result.conversation_history[-2].tool_calls[1].arguments == '{"path":"/tmp/x"}'
    assert result.conversation_history[-2].tool_calls[2].arguments == '{"path": "/"}'


async def test_a_free_call_may_also_be_rejected():
    result = await ToolCallingManager().execute_tool_calls(
        prompt(),
        tool_call_response(("lookup", {"key": "a"})),
        decisions=[ToolCallDecision.reject("call_1")],
    )
    assert ran == []
    assert "rejected" in result.conversation_history[-1].responses[0].response_data


@pytest.mark.parametrize(
    ("decisions", "message"),
    [
        ([], "no decision for pending call 'call_2'"),
        (
            [ToolCallDecision.approve("call_2"), ToolCallDecision.approve("zzz")],
            "decisions for calls the reply does not hold: zzz",
        ),
        (
            [ToolCallDecision.approve("call_2"), ToolCallDecision.reject("call_2")],
            "two decisions for 'call_2'",
        ),
    ],
)
async def test_decisions_that_do_not_fit_the_reply_are_refused(decisions, message):
    reply = tool_call_response(("lookup", {"key": "a"}), ("wipe", {"path": "/tmp"}))
    with pytest.raises(ToolCallDecisionError, match=message):
        await ToolCallingManager().execute_tool_calls(prompt(), reply, decisions=decisions)
    assert ran == []


async def test_decision_must_be_allowed_by_the_policy_and_edits_are_rechecked():
    policy = ToolCallConfirmationPolicy(
        {
            "wipe": {
                "when": {"properties": {"path": {"const": "/"}}, "required": ["path"]},
                "allowed_decisions": ["approve", "reject"],
            }
        }
    )
    manager = ToolCallingManager(confirmation_policy=policy)
    root = tool_call_response(("wipe", {"path": "/"}))
    with pytest.raises(ToolCallDecisionError, match="'edit' is not allowed"):
        await manager.execute_tool_calls(
            prompt(), root, decisions=[ToolCallDecision.edit("call_1", {"path": "/tmp"})]
        )
    # A call that needed nothing cannot be edited into one whose policy forbids edits.
    tmp = tool_call_response(("wipe", {"path": "/tmp"}))
    with pytest.raises(ToolCallDecisionError, match="edited arguments of call 'call_1'"):
        await manager.execute_tool_calls(
            prompt(), tmp, decisions=[ToolCallDecision.edit("call_1", {"path": "/"})]
        )
    assert ran == []


async def test_granted_tools_need_no_approval():
    result = await ToolCallingManager().execute_tool_calls(
        prompt(), tool_call_response(("wipe", {"path": "/tmp"})), granted={"wipe"}
    )
    assert ran == ["wipe /tmp"]
    assert result.conversation_history[-1].responses[0].response_data == "wiped /tmp"
