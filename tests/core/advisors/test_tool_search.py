"""ToolSearchToolCallingAdvisor: 100 tools found on demand, re-indexing, eviction, order."""

from __future__ import annotations

import json

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    AdvisorStateError,
    ChatClient,
    ChatClientResponseAccumulator,
    ScriptedChatModel,
    SystemMessage,
)
from advisors_app.core.advisors import ToolCallingAdvisor, ToolSearchToolCallingAdvisor
from advisors_app.core.advisors.tool_search import (
    DEFAULT_SYSTEM_MESSAGE_SUFFIX,
    TOOL_SEARCH_TOOL_SESSION_ID_KEY,
)
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import FunctionToolCallback, tool
from advisors_app.core.tools.search import (
    AlwaysEvictStrategy,
    KeywordToolIndex,
    LruEvictionStrategy,
    RegexToolIndex,
    VectorToolIndex,
)

MODES = ["call", "stream"]

_SUBJECTS = [
    "invoice",
    "shipment",
    "ticket",
    "contract",
    "employee",
    "warehouse",
    "payroll",
    "license",
    "backup",
    "printer",
    "calendar",
    "budget",
    "survey",
    "vendor",
    "refund",
    "meeting room",
    "parking",
    "password",
    "newsletter",
    "audit",
    "sensor",
    "firmware",
    "coupon",
    "podcast",
    "recipe",
]
_ACTIONS = ["create", "archive", "list", "delete"]


def _filler(name: str, description: str) -> FunctionToolCallback:
    def run(reference: str = "") -> str:
        return f"{name} done"

    return FunctionToolCallback(run, name=name, description=description)


@tool
def get_weather(city: str) -> str:
    """Current weather and forecast for a city."""
    return f"Sunny in {city}"


@tool
def send_email(to: str, body: str) -> str:
    """Send an email message to a recipient."""
    return "sent"


def hundred_tools() -> list:
    fillers = [
        _filler(f"{action}_{subject.replace(' ', '_')}", f"{action.title()} a {subject} record.")
        for subject in _SUBJECTS
        for action in _ACTIONS
    ][:98]
    # The two real tools sit in the middle, so order checks mean something.
    return [*fillers[:50], send_email, get_weather, *fillers[50:]]


TOOLS = hundred_tools()
_MINILM = MiniLmEmbeddingModel()
INDEXES = {
    "regex": RegexToolIndex,
    "keyword": KeywordToolIndex,
    "vector": lambda: VectorToolIndex(_MINILM),
}


async def run(spec, mode):
    if mode == "call":
        return (await spec.acall()).chat_client_response()
    accumulator = ChatClientResponseAccumulator()
    async for chunk in spec.stream().chat_client_responses():
        accumulator.add(chunk)
    return accumulator.result()


def search_call(query: str, **extra):
    return tool_call_response(("toolSearchTool", {"query": query, **extra}))


def names(prompt) -> list[str]:
    return [cb.name for cb in prompt.options.tool_callbacks]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", sorted(INDEXES))
async def test_finds_one_of_100_tools_and_offers_it_next_round(kind, mode):
    assert len(TOOLS) == 100
    model = ScriptedChatModel(
        [
            search_call("weather forecast for a city"),
            tool_call_response(("get_weather", {"city": "Paris"})),
            "It is sunny in Paris.",
        ]
    )
    advisor = ToolSearchToolCallingAdvisor(INDEXES[kind](), max_results=3)
    client = ChatClient(model, default_advisors=[advisor])
    spec = client.prompt("weather in Paris?").tools(*TOOLS).advisor_param(CONVERSATION_ID, "c1")
    response = await run(spec, mode)

    assert response.chat_response.text == "It is sunny in Paris."
    first, second, third = model.prompts
    assert names(first) == ["toolSearchTool"]
    assert first.instructions[0] == SystemMessage(DEFAULT_SYSTEM_MESSAGE_SUFFIX)
    found = json.loads(second.instructions[-1].responses[0].response_data)
    assert found[0] == "get_weather" and len(found) <= 3
    offered = names(second)
    assert offered[0] == "toolSearchTool" and "get_weather" in offered
    # Found tools come in the order the request lists them, whatever their rank.
    listed = [t.name for t in TOOLS]
    assert offered[1:] == sorted(offered[1:], key=listed.index)
    assert third.instructions[-1].responses[0].response_data == "Sunny in Paris"
    assert second.options.tool_context[TOOL_SEARCH_TOOL_SESSION_ID_KEY] == "c1"
    assert "tool_search.cached_tool_callbacks" not in response.context


class CountingIndex(RegexToolIndex):
    def __init__(self) -> None:
        super().__init__()
        self.indexed: list[str] = []
        self.cleared: list[str] = []

    async def index_tools(self, session_id, tools):
        self.indexed.append(session_id)
        await super().index_tools(session_id, tools)

    async def clear_index(self, session_id):
        self.cleared.append(session_id)
        await super().clear_index(session_id)


async def turn(client, conversation, *tools):
    spec = client.prompt("hi").tools(*tools).advisor_param(CONVERSATION_ID, conversation)
    return (await spec.acall()).content()


async def test_reindexes_only_when_the_tool_set_changes():
    index = CountingIndex()
    client = ChatClient(
        ScriptedChatModel(["ok"], repeat=True),
        default_advisors=[ToolSearchToolCallingAdvisor(index)],
    )
    await turn(client, "c1", get_weather, send_email)
    await turn(client, "c1", send_email, get_weather)  # same set, other order
    assert index.indexed == ["c1"]
    await turn(client, "c1", get_weather)
    assert index.indexed == ["c1", "c1"]
    await turn(client, "c2", get_weather)
    assert index.indexed == ["c1", "c1", "c2"]


async def test_always_evict_reindexes_every_turn_and_lru_drops_old_sessions():
    index = CountingIndex()
    advisor = ToolSearchToolCallingAdvisor(index, eviction_strategy=AlwaysEvictStrategy())
    client = ChatClient(ScriptedChatModel(["ok"], repeat=True), default_advisors=[advisor])
    await turn(client, "c1", get_weather)
    await turn(client, "c1", get_weather)
    assert index.indexed == ["c1", "c1"]

    index = CountingIndex()
    advisor = ToolSearchToolCallingAdvisor(index, eviction_strategy=LruEvictionStrategy(1))
    client = ChatClient(ScriptedChatModel(["ok"], repeat=True), default_advisors=[advisor])
    await turn(client, "c1", get_weather)
    await turn(client, "c2", get_weather)
    assert "c1" in index.cleared
    await turn(client, "c1", get_weather)
    assert index.indexed == ["c1", "c2", "c1"]


@pytest.mark.parametrize("accumulate", [True, False])
async def test_reference_tool_name_accumulation(accumulate):
    model = ScriptedChatModel([search_call("weather"), search_call("email message"), "done"])
    advisor = ToolSearchToolCallingAdvisor(
        RegexToolIndex(), reference_tool_name_accumulation=accumulate, max_results=1
    )
    client = ChatClient(model, default_advisors=[advisor])
    await turn(client, "c1", *TOOLS)
    expected = (
        ["toolSearchTool", "send_email", "get_weather"]
        if accumulate
        else [
            "toolSearchTool",
            "send_email",
        ]
    )
    assert names(model.prompts[2]) == expected


async def test_the_model_may_ask_for_more_results():
    model = ScriptedChatModel([search_call("record", maxResults=5), "done"])
    client = ChatClient(model, default_advisors=[ToolSearchToolCallingAdvisor(RegexToolIndex())])
    await turn(client, "c1", *TOOLS)
    assert len(names(model.prompts[1])) == 6


@pytest.mark.parametrize("mode", MODES)
async def test_suffix_goes_after_an_existing_system_message(mode):
    model = ScriptedChatModel(["ok"])
    client = ChatClient(model, default_advisors=[ToolSearchToolCallingAdvisor(RegexToolIndex())])
    spec = client.prompt("hi").system("Be brief.").tools(get_weather)
    await run(spec.advisor_param(CONVERSATION_ID, "c1"), mode)
    assert model.prompts[0].instructions[0] == SystemMessage(
        "Be brief." + DEFAULT_SYSTEM_MESSAGE_SUFFIX
    )


@pytest.mark.parametrize("mode", MODES)
async def test_missing_session_id_is_refused(mode):
    client = ChatClient(
        ScriptedChatModel(["ok"]), default_advisors=[ToolSearchToolCallingAdvisor(RegexToolIndex())]
    )
    message = "context must contain a non-null value for 'chat_memory_conversation_id'"
    with pytest.raises(ValueError, match=message):
        await run(client.prompt("hi").tools(get_weather), mode)


def test_construction_rules():
    with pytest.raises(ValueError, match="toolIndex is required"):
        ToolSearchToolCallingAdvisor(None)
    with pytest.raises(ValueError, match="systemMessageSuffix cannot be null or empty"):
        ToolSearchToolCallingAdvisor(RegexToolIndex(), system_message_suffix="  ")
    advisor = ToolSearchToolCallingAdvisor(RegexToolIndex(), session_id_key_name="tenant")
    assert advisor.name == "ToolSearchToolCallingAdvisor"
    assert advisor.order == ToolCallingAdvisor.DEFAULT_ORDER


async def test_it_is_the_chains_tool_advisor():
    client = ChatClient(
        ScriptedChatModel(["ok"]),
        default_advisors=[ToolSearchToolCallingAdvisor(RegexToolIndex()), ToolCallingAdvisor()],
    )
    with pytest.raises(AdvisorStateError, match="At most one ToolAdvisor"):
        await turn(client, "c1", get_weather)
