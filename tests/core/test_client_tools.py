"""ChatClient and the tool loop: auto-registration rules, history mode, two ToolAdvisors."""

from __future__ import annotations

import warnings

import pytest

from advisors_app.core import (
    DEFAULT_TOOL_CALLING_ORDER,
    TOOL_CALLING_AUTO_REGISTER,
    AdvisorStateError,
    BaseAdvisor,
    CallAdvisor,
    ChatClient,
    MemoryAdvisor,
    ScriptedChatModel,
    ToolAdvisor,
    ToolResponseMessage,
)
from advisors_app.core.advisors import ToolCallingAdvisor
from advisors_app.core.client import MemoryInsideToolLoopWarning
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool

MODES = ["call", "stream"]


@tool
def clock() -> str:
    """The time."""
    return "noon"


class FakeMemory(BaseAdvisor, MemoryAdvisor):
    """Stands in for a memory advisor: only its marker and order matter here."""

    def __init__(self, order: int) -> None:
        self._order = order

    @property
    def order(self) -> int:
        return self._order


class SeenChain(BaseAdvisor):
    """Records the advisors of the chain it runs in."""

    order = 0

    def __init__(self) -> None:
        self.names: list[list[str]] = []

    def before(self, request, chain):
        self.names.append([a.name for a in chain.call_advisors or chain.stream_advisors])
        return request


async def answer(spec, mode):
    if mode == "call":
        return (await spec.acall()).content()
    return "".join([t async for t in spec.stream().content()])


def script():
    return ScriptedChatModel([tool_call_response(("clock", {})), "it is noon"] * 3)


@pytest.mark.parametrize("mode", MODES)
async def test_tool_loop_is_auto_registered(mode):
    model = script()
    assert await answer(ChatClient(model).prompt("time?").tools(clock), mode) == "it is noon"
    assert isinstance(model.prompts[1].instructions[-1], ToolResponseMessage)


@pytest.mark.parametrize("mode", MODES)
async def test_auto_registration_can_be_disabled_by_param(mode):
    model = script()
    client = ChatClient(model, default_advisor_params={TOOL_CALLING_AUTO_REGISTER: False})
    spec = client.prompt("time?").tools(clock)
    if mode == "call":
        response = (await spec.acall()).chat_response()
        assert response.has_tool_calls()
    else:
        chunks = [c async for c in spec.stream().chat_responses()]
        assert chunks[0].has_tool_calls()
    assert len(model.prompts) == 1
    # A request param overrides the default one.
    spec = client.prompt("time?").tools(clock).advisor_param(TOOL_CALLING_AUTO_REGISTER, True)
    assert await answer(spec, mode) == "it is noon"


@pytest.mark.parametrize("mode", MODES)
async def test_a_present_tool_advisor_suppresses_auto_registration(mode):
    seen = SeenChain()
    own = ToolCallingAdvisor(order=DEFAULT_TOOL_CALLING_ORDER + 10)
    client = ChatClient(script(), default_advisors=[own, seen])
    assert await answer(client.prompt("t").tools(clock), mode) == "it is noon"
    assert all(names.count("Tool Calling Advisor") == 0 for names in seen.names)
    assert len(seen.names) == 2  # inside the loop: once per round


@pytest.mark.parametrize("mode", MODES)
async def test_auto_registered_advisor_is_not_baked_into_client_or_spec(mode):
    client = ChatClient(script())
    spec = client.prompt("t").tools(clock)
    await answer(spec, mode)
    assert client.default_advisors == ()
    assert spec._advisors == []
    assert client.mutate().default_advisors == ()


@pytest.mark.parametrize(
    ("memory_order", "history_enabled"),
    [
        (DEFAULT_TOOL_CALLING_ORDER - 100, True),  # memory wraps the loop (the default)
        (DEFAULT_TOOL_CALLING_ORDER, True),  # equal order is not "inside"
        (DEFAULT_TOOL_CALLING_ORDER + 100, False),  # memory inside the loop supplies history
    ],
)
@pytest.mark.parametrize("mode", MODES)
async def test_history_mode_follows_memory_advisor_position(mode, memory_order, history_enabled):
    model = script()
    client = ChatClient(model, default_advisors=[FakeMemory(memory_order)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        await answer(client.prompt("t").tools(clock), mode)
    inside = [w for w in caught if issubclass(w.category, MemoryInsideToolLoopWarning)]
    assert bool(inside) is not history_enabled
    second = model.prompts[1].instructions
    assert (len(second) == 3) is history_enabled
    assert (len(second) == 1) is not history_enabled


@pytest.mark.parametrize("mode", MODES)
async def test_auto_registration_happens_without_tools(mode):
    seen = SeenChain()
    model = ScriptedChatModel(["plain"])
    client = ChatClient(model, default_advisors=[seen])
    assert await answer(client.prompt("hi"), mode) == "plain"


def test_the_client_hands_its_tool_calling_manager_to_the_auto_advisor():
    from advisors_app.core.tools import ToolCallingManager

    manager = ToolCallingManager(max_calls_per_tool=1)
    client = ChatClient(script(), tool_calling_manager=manager)
    chain = client.prompt("t")._chain(CallAdvisor)
    (advisor,) = [a for a in chain.call_advisors if isinstance(a, ToolAdvisor)]
    assert advisor.tool_calling_manager is manager
    assert client.mutate().tool_calling_manager is manager


class OtherToolAdvisor(BaseAdvisor, ToolAdvisor):
    name = "Other"
    order = 5


@pytest.mark.parametrize("mode", MODES)
async def test_two_tool_advisors_raise_springs_error(mode):
    client = ChatClient(script(), default_advisors=[ToolCallingAdvisor()])
    spec = client.prompt("t").advisors(OtherToolAdvisor())
    message = (
        r"At most one ToolAdvisor is allowed in the advisor chain, but found 2: "
        rf"\[Tool Calling Advisor \(order={DEFAULT_TOOL_CALLING_ORDER}\), Other \(order=5\)\]"
    )
    with pytest.raises(AdvisorStateError, match=message):
        await answer(spec, mode)
