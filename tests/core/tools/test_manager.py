"""ToolCallingManager: resolution, per-turn counting, breach details, failure handling."""

from __future__ import annotations

import asyncio

import pytest

from advisors_app.core import (
    AdvisorStateError,
    AssistantMessage,
    ChatResponse,
    Prompt,
    ToolCallingChatOptions,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.messages import ToolCall
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import (
    ToolCallingManager,
    ToolCallLimitExceededError,
    ToolRegistry,
    canonical_arguments,
    tool,
)


@tool
def count(n: int) -> int:
    """Echo a number."""
    return n


def prompt(*messages, tools=(count,), names=()):
    return Prompt(messages, ToolCallingChatOptions(tool_callbacks=tools, tool_names=names))


def earlier_round(*ns):
    calls = tuple(ToolCall(f"old{n}", "count", f'{{"n": {n}}}') for n in ns)
    responses = [ToolResponse(f"old{n}", "count", str(n)) for n in ns]
    return AssistantMessage("", tool_calls=calls), ToolResponseMessage(responses)


async def test_history_is_prompt_plus_assistant_plus_responses():
    manager = ToolCallingManager()
    request = prompt(UserMessage("go"))
    response = tool_call_response(("count", {"n": 1}), ("count", {"n": 2}))
    result = await manager.execute_tool_calls(request, response)
    user, assistant, tools = result.conversation_history
    assert user == UserMessage("go")
    assert assistant == response.result.output
    assert [r.response_data for r in tools.responses] == ["1", "2"]
    assert result.return_direct is False


async def test_limits_count_only_the_current_turn():
    manager = ToolCallingManager(max_calls_per_tool=2)
    previous_turn = (UserMessage("before"), *earlier_round(1, 2))
    request = prompt(*previous_turn, UserMessage("now"), *earlier_round(3))
    result = await manager.execute_tool_calls(request, tool_call_response(("count", {"n": 4})))
    assert result.conversation_history[-1].responses[0].response_data == "4"
    with pytest.raises(ToolCallLimitExceededError) as error:
        await manager.execute_tool_calls(
            prompt(*result.conversation_history), tool_call_response(("count", {"n": 5}))
        )
    breach = error.value
    assert str(breach) == "Tool call limit (2) exceeded for tool 'count'"
    assert (breach.kind, breach.limit, breach.tool_name) == ("tool", 2, "count")
    assert breach.partial_history[-1].responses[-1].response_data.startswith("Tool call limit (2)")


async def test_breach_mid_round_runs_the_calls_before_it_only():
    ran: list[int] = []

    @tool
    def mark(n: int) -> str:
        """Mark."""
        ran.append(n)
        return f"m{n}"

    manager = ToolCallingManager(max_total_tool_calls=2)
    response = tool_call_response(*[("mark", {"n": n}) for n in (1, 2, 3, 4)])
    with pytest.raises(ToolCallLimitExceededError) as error:
        await manager.execute_tool_calls(prompt(UserMessage("x"), tools=(mark,)), response)
    assert sorted(ran) == [1, 2]
    generation = error.value.build_generation()
    assert [r.response_data for r in generation.metadata["partialToolResponses"]] == ["m1", "m2"]
    assert generation.text.startswith("Total tool call limit (2) exceeded for this turn.")


async def test_identical_calls_within_one_round_count_too():
    manager = ToolCallingManager(max_identical_calls=2)
    response = tool_call_response(*[("count", '{"n": 1}')] * 3)
    with pytest.raises(ToolCallLimitExceededError, match="Identical tool call limit \\(2\\)"):
        await manager.execute_tool_calls(prompt(UserMessage("x")), response)
    disabled = ToolCallingManager(max_identical_calls=None)
    result = await disabled.execute_tool_calls(prompt(UserMessage("x")), response)
    assert len(result.conversation_history[-1].responses) == 3


def test_canonical_arguments():
    assert canonical_arguments(' { "b": 1, "a": [1, 2] } ') == '{"a":[1,2],"b":1}'
    assert canonical_arguments("") == "{}"
    assert canonical_arguments(" not json ") == "not json"


async def test_only_the_first_generation_with_tool_calls_runs():
    manager = ToolCallingManager()
    first = tool_call_response(("count", {"n": 1})).result
    second = tool_call_response(("count", {"n": 2})).result
    result = await manager.execute_tool_calls(
        prompt(UserMessage("x")), ChatResponse((first, second))
    )
    assert [r.response_data for r in result.conversation_history[-1].responses] == ["1"]
    with pytest.raises(AdvisorStateError, match="No tool call requested by the chat model"):
        await manager.execute_tool_calls(prompt(UserMessage("x")), ChatResponse.of_text("no"))


async def test_tool_names_resolve_through_the_registry_or_fail_in_springs_words():
    manager = ToolCallingManager(tool_registry=ToolRegistry([count]))
    options = ToolCallingChatOptions(tool_names=("count",))
    assert [d.name for d in manager.resolve_tool_definitions(options)] == ["count"]
    assert manager.resolve_tool_callbacks(None) == ()
    with pytest.raises(AdvisorStateError, match="No ToolCallback found for tool name: nope"):
        manager.resolve_tool_callbacks(ToolCallingChatOptions(tool_names=("nope",)))


async def test_exception_processor_may_fail_the_request_and_stops_sibling_calls():
    cancelled = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return ""

    @tool
    def fail() -> str:
        """Fails."""
        raise KeyError("k")

    def strict(call, error):
        raise error

    manager = ToolCallingManager(exception_processor=strict)
    response = tool_call_response(("hang", {}), ("fail", {}))
    with pytest.raises(KeyError):
        await manager.execute_tool_calls(prompt(UserMessage("x"), tools=(hang, fail)), response)
    await asyncio.wait_for(cancelled.wait(), 5)


def test_limits_must_be_positive():
    with pytest.raises(ValueError, match="max_calls_per_tool must be a positive integer"):
        ToolCallingManager(max_calls_per_tool=0)
    with pytest.raises(ValueError, match="max_identical_calls must be a positive integer"):
        ToolCallingManager(max_identical_calls=-1)
    manager = ToolCallingManager()
    assert (manager.max_calls_per_tool, manager.max_total_tool_calls) == (40, 150)
    assert manager.max_identical_calls == 3
