"""Extension points keep their promises (issue 35): code written against an earlier release —
a vector store that does not subclass ``VectorStore``, a ``ToolCallingManager`` overriding
``execute_tool_calls(prompt, chat_response)`` — runs every advisor that uses it, in call and
stream; ``UsageAccumulator.add_round_response`` returns the accumulated response."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    AssistantMessage,
    ChatClient,
    ChatClientResponse,
    ChatResponse,
    ScriptedChatModel,
    ToolCall,
    ToolCallDecision,
    Usage,
    UserMessage,
)
from advisors_app.core.advisors import (
    QuestionAnswerAdvisor,
    ToolCallingAdvisor,
    VectorStoreChatMemoryAdvisor,
)
from advisors_app.core.advisors.question_answer import RETRIEVED_DOCUMENTS
from advisors_app.core.advisors.tool_calling import APPROVAL_REQUIRED, PENDING_APPROVALS
from advisors_app.core.attributes import TOOL_CALL_DECISIONS
from advisors_app.core.rag import (
    DOCUMENT_CONTEXT,
    RetrievalAugmentationAdvisor,
    VectorStoreDocumentRetriever,
)
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import ToolCallingManager, tool
from advisors_app.core.usage import UsageAccumulator
from advisors_app.core.vectorstore import Document, SimpleVectorStore, VectorStore
from tests.core.advisors.helpers import aggregate, run
from tests.embeddings import WordEmbeddingModel

MODES = ["call", "stream"]


class PlainStore:
    """A vector store as the documented contract describes it, without ``VectorStore``: the
    six methods and nothing else (no ``for_context``, no ``name``)."""

    def __init__(self) -> None:
        self._documents = SimpleVectorStore(WordEmbeddingModel())
        self.searches: list[object] = []
        self.added: list[Document] = []

    def add(self, documents):
        self.added.extend(documents)
        self._documents.add(documents)

    def delete(self, ids_or_filter):
        self._documents.delete(ids_or_filter)

    def similarity_search(self, request):
        self.searches.append(request)
        return self._documents.similarity_search(request)

    async def aadd(self, documents):
        self.added.extend(documents)
        await self._documents.aadd(documents)

    async def adelete(self, ids_or_filter):
        await self._documents.adelete(ids_or_filter)

    async def asimilarity_search(self, request):
        self.searches.append(request)
        return await self._documents.asimilarity_search(request)


@pytest.fixture
async def store():
    plain = PlainStore()
    await plain.aadd(
        [
            Document("Oslo is the capital of Norway.", id="capital"),
            Document("Bergen is a rainy city.", id="rain"),
        ]
    )
    plain.added.clear()
    return plain


def test_the_plain_store_is_no_vector_store(store):
    assert not isinstance(store, VectorStore)
    assert not hasattr(store, "for_context")


@pytest.mark.parametrize("mode", MODES)
async def test_question_answer_advisor_searches_a_plain_store(store, mode):
    model = ScriptedChatModel(["Oslo."])
    client = ChatClient(model, default_advisors=(QuestionAnswerAdvisor(store),))

    response = await run(mode, client, "What is the capital of Norway?")

    assert response.chat_response.result.output.text == "Oslo."
    documents = response.chat_response.metadata[RETRIEVED_DOCUMENTS]
    assert "capital" in [d.id for d in documents]
    assert "Oslo is the capital of Norway." in model.prompts[0].instructions[-1].text
    assert len(store.searches) == 1


@pytest.mark.parametrize("mode", MODES)
async def test_retrieval_augmentation_advisor_searches_a_plain_store(store, mode):
    model = ScriptedChatModel(["Oslo."])
    advisor = RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(store, top_k=1))
    client = ChatClient(model, default_advisors=(advisor,))

    response = await run(mode, client, "What is the capital of Norway?")

    assert response.chat_response.result.output.text == "Oslo."
    assert [d.id for d in response.chat_response.metadata[DOCUMENT_CONTEXT]] == ["capital"]
    assert "Oslo is the capital of Norway." in model.prompts[0].instructions[-1].text
    assert store.searches[0].top_k == 1


@pytest.mark.parametrize("mode", MODES)
async def test_vector_store_chat_memory_advisor_remembers_in_a_plain_store(store, mode):
    model = ScriptedChatModel(["Noted.", "You live in Tromso."])
    client = ChatClient(model, default_advisors=(VectorStoreChatMemoryAdvisor(store),))

    await run(mode, client, "I live in Tromso.", **{CONVERSATION_ID: "c1"})
    response = await run(mode, client, "Where do I live?", **{CONVERSATION_ID: "c1"})

    assert response.chat_response.result.output.text == "You live in Tromso."
    assert [(d.text, d.metadata["conversationId"]) for d in store.added[:2]] == [
        ("I live in Tromso.", "c1"),
        ("Noted.", "c1"),
    ]
    system = model.prompts[1].instructions[0].text
    assert '<memory-entry type="user">I live in Tromso.</memory-entry>' in system


ran: list[str] = []


@pytest.fixture(autouse=True)
def _clear_ran():
    ran.clear()


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    ran.append(city)
    return f"sunny in {city}"


@tool(requires_approval=True)
def delete_note(note_id: int) -> str:
    """Delete one of the user's notes."""
    ran.append(f"note {note_id}")
    return f"deleted {note_id}"


class EarlierManager(ToolCallingManager):
    """A manager written against the release before the observer and approvals."""

    def __init__(self) -> None:
        super().__init__()
        self.rounds = 0

    async def execute_tool_calls(self, prompt, chat_response):
        self.rounds += 1
        return await super().execute_tool_calls(prompt, chat_response)


class ObservingManager(ToolCallingManager):
    """A manager written against the release with the observer and before approvals."""

    async def execute_tool_calls(self, prompt, chat_response, observer=None):
        return await super().execute_tool_calls(prompt, chat_response, observer)


class ToolCalls:
    """A chain observer that is told about each tool call."""

    def __init__(self) -> None:
        self.finished: list[tuple[str, bool]] = []

    def observe_call(self, advisor, request, proceed):
        return proceed(request)

    def observe_stream(self, advisor, request, proceed):
        return proceed(request)

    def tool_call_started(self, call):
        pass

    def tool_call_finished(self, call, ok, error, duration):
        self.finished.append((call.name, ok))


def tool_client(model, manager, observer=None):
    return ChatClient(model, default_advisors=(ToolCallingAdvisor(manager),), observer=observer)


@pytest.mark.parametrize("mode", MODES)
async def test_an_earlier_manager_override_runs_the_tool_rounds(mode):
    manager = EarlierManager()
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "Oslo"})),
            tool_call_response(("weather", {"city": "Bergen"})),
            "Sunny in both.",
        ]
    )
    spec = tool_client(model, manager).prompt("weather in Oslo and Bergen?").tools(weather)

    response = await run_spec(spec, mode)

    assert response.chat_response.result.output.text == "Sunny in both."
    assert manager.rounds == 2
    assert ran == ["Oslo", "Bergen"]
    assert model.prompts[1].instructions[-1].responses[0].response_data == "sunny in Oslo"


@pytest.mark.parametrize("mode", MODES)
async def test_an_override_taking_the_observer_gets_it(mode):
    observer = ToolCalls()
    model = ScriptedChatModel([tool_call_response(("weather", {"city": "Oslo"})), "Sunny."])
    spec = tool_client(model, ObservingManager(), observer).prompt("weather?").tools(weather)

    response = await run_spec(spec, mode)

    assert response.chat_response.result.output.text == "Sunny."
    assert observer.finished == [("weather", True)]


@pytest.mark.parametrize("mode", MODES)
async def test_an_earlier_manager_override_still_pauses_for_approval(mode):
    manager = EarlierManager()
    model = ScriptedChatModel([tool_call_response(("delete_note", {"note_id": 7}))])
    spec = tool_client(model, manager).prompt("delete note 7").tools(weather, delete_note)

    response = await run_spec(spec, mode)

    assert ran == []
    assert response.chat_response.result.finish_reason == APPROVAL_REQUIRED
    assert [p["tool"] for p in response.chat_response.metadata[PENDING_APPROVALS]] == [
        "delete_note"
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_an_earlier_manager_override_cannot_resume_and_says_what_to_add(mode):
    manager = EarlierManager()
    model = ScriptedChatModel(["never reached"])
    paused = AssistantMessage("", tool_calls=(ToolCall("a", "delete_note", '{"note_id": 7}'),))
    spec = (
        tool_client(model, manager)
        .prompt()
        .messages(UserMessage("delete note 7"), paused)
        .tools(weather, delete_note)
    )
    spec.advisor_param(TOOL_CALL_DECISIONS, [ToolCallDecision.approve("a")])

    with pytest.raises(TypeError) as raised:
        await run_spec(spec, mode)

    message = str(raised.value)
    assert "EarlierManager.execute_tool_calls()" in message
    assert "`*, decisions=None, granted=()`" in message
    assert ran == [] and manager.rounds == 0 and model.prompts == []


async def run_spec(spec, mode) -> ChatClientResponse:
    """The response of one call, or the aggregate of one stream, of a prepared request."""
    if mode == "call":
        return await (await spec.acall()).achat_client_response()
    return aggregate([chunk async for chunk in spec.stream().chat_client_responses()])


def test_add_round_response_returns_the_accumulated_response():
    accumulator = UsageAccumulator()

    first = accumulator.add_round_response(ChatResponse.of_text("call", usage=Usage(100, 20)))
    final = accumulator.add_round_response(ChatResponse.of_text("done", usage=Usage(150, 30)))

    assert isinstance(first, ChatClientResponse)
    assert first.chat_response.metadata.usage == Usage(100, 20)
    assert final.chat_response.text == "done"
    assert final.chat_response.metadata.usage == Usage(250, 50)
    assert final == accumulator.accumulated_response
    assert accumulator.add_round_response(None) == final


def test_add_round_response_of_nothing_returns_nothing():
    assert UsageAccumulator().add_round_response(None) is None
