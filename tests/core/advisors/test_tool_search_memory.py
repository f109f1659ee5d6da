"""Tools found by tool search stay offered after they run, with memory inside the loop (#7034).

Spring AI #7034: ``ToolSearchToolCallingAdvisor`` with internal history disabled and a memory
advisor inside the tool loop offers a found tool for one round only. Once the tool has run, the
next round's messages (the system message and the latest tool response) no longer show the
search that found it, so the tool disappears and a model that must retry (after an input
error) has to search again. Here a tool found in the turn stays offered, in call and stream.
"""

from __future__ import annotations

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    DEFAULT_TOOL_CALLING_ORDER,
    AssistantMessage,
    ChatClient,
    ScriptedChatModel,
    ToolResponseMessage,
    UserMessage,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor, ToolSearchToolCallingAdvisor
from advisors_app.core.client import MemoryInsideToolLoopWarning
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool
from advisors_app.core.tools.search import RegexToolIndex
from tests.core.advisors.helpers import run


@tool
def lookupShipment(shipment_id: str) -> str:
    """Look up the status of a shipment by its id."""
    if not shipment_id.isdigit():
        raise ValueError(f"shipment_id must be digits, got {shipment_id!r}")
    return f"shipment {shipment_id}: in transit"


@tool
def send_invoice(customer: str) -> str:
    """Send an invoice to a customer."""
    return "sent"


def offered(prompt) -> list[str]:
    return [cb.name for cb in prompt.options.tool_callbacks]


def script():
    return ScriptedChatModel(
        [
            tool_call_response(("toolSearchTool", {"query": "shipment"})),
            tool_call_response(("lookupShipment", {"shipment_id": "SHIP-42"})),
            tool_call_response(("lookupShipment", {"shipment_id": "42"})),
            "Shipment 42 is in transit.",
        ]
    )


@pytest.mark.parametrize("accumulate", [True, False])
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_a_found_tool_stays_offered_after_it_ran(mode, accumulate):
    memory = MessageWindowChatMemory()
    model = script()
    advisor = ToolSearchToolCallingAdvisor(
        RegexToolIndex(),
        conversation_history_enabled=False,
        reference_tool_name_accumulation=accumulate,
    )
    client = ChatClient(
        model,
        default_advisors=[
            advisor,
            MessageChatMemoryAdvisor(memory, order=DEFAULT_TOOL_CALLING_ORDER + 100),
        ],
        default_tools=[send_invoice, lookupShipment],
    )
    with pytest.warns(MemoryInsideToolLoopWarning):
        response = await run(mode, client, "Where is shipment 42?", **{CONVERSATION_ID: "c1"})
    assert response.chat_response.text == "Shipment 42 is in transit."
    first, second, third, fourth = model.prompts
    assert offered(first) == ["toolSearchTool"]
    assert offered(second) == ["toolSearchTool", "lookupShipment"]
    # The retry after the input error needs no second search.
    assert offered(third) == ["toolSearchTool", "lookupShipment"]
    assert offered(fourth) == ["toolSearchTool", "lookupShipment"]
    assert "must be digits" in third.instructions[-1].responses[0].response_data
    # Memory inside the loop holds the whole exchange, in order.
    stored = await memory.aget("c1")
    assert [type(m) for m in stored] == [
        UserMessage,
        *[AssistantMessage, ToolResponseMessage] * 3,
        AssistantMessage,
    ]


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_without_accumulation_a_new_search_still_replaces_the_found_tools(mode):
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(
        [
            tool_call_response(("toolSearchTool", {"query": "shipment"})),
            tool_call_response(("lookupShipment", {"shipment_id": "42"})),
            tool_call_response(("toolSearchTool", {"query": "invoice"})),
            "Done.",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(
        RegexToolIndex(),
        conversation_history_enabled=False,
        reference_tool_name_accumulation=False,
    )
    client = ChatClient(
        model,
        default_advisors=[
            advisor,
            MessageChatMemoryAdvisor(memory, order=DEFAULT_TOOL_CALLING_ORDER + 100),
        ],
        default_tools=[send_invoice, lookupShipment],
    )
    with pytest.warns(MemoryInsideToolLoopWarning):
        await run(mode, client, "Ship and bill", **{CONVERSATION_ID: "c1"})
    assert offered(model.prompts[2]) == ["toolSearchTool", "lookupShipment"]
    assert offered(model.prompts[3]) == ["toolSearchTool", "send_invoice"]
