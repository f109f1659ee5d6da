"""RetrievalAugmentationAdvisor in call and stream: the pipeline, B21, B22, concurrency,
duplicate expansions, empty user text, and retrieval once per turn in a tool loop."""

from __future__ import annotations

import asyncio

import pytest

from advisors_app.core import (
    CONVERSATION_ID,
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    AdvisorStateError,
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    MemoryAdvisor,
    Prompt,
    ScriptedChatModel,
    SystemMessage,
    UserMessage,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor
from advisors_app.core.aggregation import ChatClientResponseAccumulator
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.core.rag import (
    DOCUMENT_CONTEXT,
    CompressionQueryTransformer,
    ContextualQueryAugmenter,
    MultiQueryExpander,
    Query,
    RetrievalAugmentationAdvisor,
    VectorStoreDocumentRetriever,
)
from advisors_app.core.vectorstore import Document, SimpleVectorStore
from tests.embeddings import WordEmbeddingModel
from tests.retrieval import CountingStore, LoopingAdvisor, chain_of, drain, tool_call_response

EMPTY = (
    "The user query is outside your knowledge base.\n"
    "Politely inform the user that you can't answer it.\n"
)


@pytest.fixture
async def store():
    inner = SimpleVectorStore(WordEmbeddingModel())
    await inner.aadd(
        [
            Document("The population of Oslo is about 700,000 inhabitants.", id="population"),
            Document("Oslo is the capital of Norway.", id="capital"),
        ]
    )
    return CountingStore(inner)


def request(text, *history, **context):
    return ChatClientRequest(Prompt([*history, UserMessage(text)]), context)


def aggregate(chunks):
    accumulator = ChatClientResponseAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.result()


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_augments_the_prompt_and_reports_documents(store, mode):
    model = ScriptedChatModel(["About 700,000."])
    advisor = RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(store, top_k=1))
    chain = chain_of(model, advisor)
    question = request("How large is the population of Oslo?", SystemMessage("sys"))
    if mode == "call":
        response = await chain.next_call(question)
    else:
        response = aggregate(await drain(chain.next_stream(question)))
    assert [d.id for d in response.chat_response.metadata[DOCUMENT_CONTEXT]] == ["population"]
    assert [d.id for d in response.context[DOCUMENT_CONTEXT]] == ["population"]
    sent = model.prompts[0]
    assert sent.instructions[0] == SystemMessage("sys")
    assert sent.user_message.text.startswith(
        "Context information is below.\n\n---------------------\n"
        "<document>The population of Oslo is about 700,000 inhabitants.</document>\n"
        "---------------------\n"
    )
    assert sent.user_message.text.endswith(
        "Query: How large is the population of Oslo?\n\nAnswer:\n"
    )


@pytest.mark.parametrize("mode", ["call", "stream"])
@pytest.mark.parametrize("allow", [False, True])
async def test_b21_empty_retrieval(mode, allow):
    empty = SimpleVectorStore(WordEmbeddingModel())
    model = ScriptedChatModel(["answer"])
    advisor = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(empty),
        query_augmenter=ContextualQueryAugmenter(allow_empty_context=allow),
    )
    question = request("What is the capital of France?")
    chain = chain_of(model, advisor)
    if mode == "call":
        response = await chain.next_call(question)
    else:
        response = aggregate(await drain(chain.next_stream(question)))
    assert len(model.prompts) == 1
    expected = "What is the capital of France?" if allow else EMPTY
    assert model.prompts[0].user_message.text == expected
    assert response.chat_response.metadata[DOCUMENT_CONTEXT] == []


class HistoryMemory(BaseAdvisor, MemoryAdvisor):
    """An inline memory advisor: puts a fixed conversation before the prompt's messages."""

    def __init__(self, history, order=DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER):
        self.history = history
        self._order = order

    @property
    def order(self):
        return self._order

    def before(self, request, chain):
        return request.mutate(
            prompt=request.prompt.mutate(messages=[*self.history, *request.prompt.instructions])
        )


HISTORY = [UserMessage("Tell me about Oslo"), AssistantMessage("Oslo is the capital of Norway.")]


async def test_b22_follow_up_is_compressed_with_history_before_retrieval(store):
    rewriter = ScriptedChatModel(["What is the population of Oslo?"])
    model = ScriptedChatModel(["About 700,000."])
    advisor = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(store, top_k=1),
        query_transformers=[CompressionQueryTransformer(rewriter)],
    )
    chain = chain_of(model, HistoryMemory(HISTORY), advisor)
    response = await chain.next_call(request("What about its population?"))
    compression_prompt = rewriter.prompts[0].user_message.text
    assert (
        "Conversation history:\nUSER: Tell me about Oslo\n"
        "ASSISTANT: Oslo is the capital of Norway.\n\n" in compression_prompt
    )
    assert compression_prompt.count("What about its population?") == 1
    assert store.searches[0].query == "What is the population of Oslo?"
    assert [d.id for d in response.context[DOCUMENT_CONTEXT]] == ["population"]
    sent = model.prompts[0]
    assert sent.instructions[:2] == tuple(HISTORY)
    assert sent.user_message.text.endswith("Query: What about its population?\n\nAnswer:\n")


async def test_b22_memory_inside_the_rag_advisor_warns(store):
    advisor = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(store),
        query_transformers=[CompressionQueryTransformer(ScriptedChatModel(["q"]))],
        order=-10,
    )
    chain = chain_of(ScriptedChatModel(["a"]), HistoryMemory(HISTORY, order=0), advisor)
    with pytest.warns(RuntimeWarning, match=r"runs before a memory advisor"):
        await chain.next_call(request("What about its population?"))


async def test_expanded_queries_are_retrieved_concurrently_and_duplicates_do_not_crash():
    active, peak = 0, 0

    class SlowRetriever:
        def __init__(self):
            self.queries = []

        async def retrieve(self, query):
            nonlocal active, peak
            self.queries.append(query.text)
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.01)
            active -= 1
            return [Document(f"doc for {query.text}", id=query.text, score=0.5)]

    retriever = SlowRetriever()
    expander = MultiQueryExpander(ScriptedChatModel(["b\nc\nb"]))
    advisor = RetrievalAugmentationAdvisor(retriever, query_expander=expander)
    response = await chain_of(ScriptedChatModel(["ok"]), advisor).next_call(request("a"))
    assert sorted(retriever.queries) == ["a", "b", "c"]
    assert peak == 3
    assert [d.id for d in response.context[DOCUMENT_CONTEXT]] == ["a", "b", "c"]


async def test_one_failing_retrieval_cancels_the_others_and_keeps_its_type():
    cancelled = []

    class Retriever:
        async def retrieve(self, query):
            if query.text == "bad":
                raise KeyError("boom")
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                cancelled.append(query.text)
                raise
            return []

    expander = MultiQueryExpander(ScriptedChatModel(["slow\nbad"]), number_of_queries=2)
    advisor = RetrievalAugmentationAdvisor(Retriever(), query_expander=expander)
    with pytest.raises(KeyError, match=r"boom"):
        await chain_of(ScriptedChatModel(["ok"]), advisor).next_call(request("q"))
    assert sorted(cancelled) == ["q", "slow"]


async def test_post_processors_get_the_original_query_and_sync_retrievers_work():
    seen = []

    class SyncRetriever:
        def retrieve(self, query):
            return [Document("x", id="x", score=1.0), Document("y", id="y", score=0.5)]

    class KeepFirst:
        async def process(self, query, documents):
            seen.append(query)
            return documents[:1]

    advisor = RetrievalAugmentationAdvisor(SyncRetriever(), document_post_processors=[KeepFirst()])
    response = await chain_of(ScriptedChatModel(["ok"]), advisor).next_call(request("q", k=1))
    assert [d.id for d in response.context[DOCUMENT_CONTEXT]] == ["x"]
    assert seen == [Query("q", (), {"k": 1})]


@pytest.mark.parametrize("text", ["", "   "])
async def test_empty_user_text_skips_retrieval(store, text):
    model = ScriptedChatModel(["ok"])
    advisor = RetrievalAugmentationAdvisor(VectorStoreDocumentRetriever(store))
    response = await chain_of(model, advisor).next_call(request(text))
    assert store.searches == []
    assert model.prompts[0].user_message.text == text
    assert DOCUMENT_CONTEXT not in response.chat_response.metadata


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_retrieval_runs_once_per_turn_when_a_tool_loop_reenters(store, mode):
    model = ScriptedChatModel([tool_call_response(), "Paris."])
    rewriter = ScriptedChatModel(["Oslo population"])
    advisor = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(store, top_k=1),
        query_transformers=[CompressionQueryTransformer(rewriter)],
    )
    chain = chain_of(model, advisor, LoopingAdvisor())
    question = request("How many people live in Oslo?")
    if mode == "call":
        await chain.next_call(question)
    else:
        await drain(chain.next_stream(question))
    assert len(store.searches) == 1
    assert len(rewriter.prompts) == 1
    assert len(model.prompts) == 2
    assert model.prompts[0].user_message.text == model.prompts[1].user_message.text
    assert (
        "The population of Oslo is about 700,000 inhabitants." in model.prompts[1].user_message.text
    )


def test_constructor_validation():
    with pytest.raises(AdvisorStateError, match=r"documentRetriever cannot be null"):
        RetrievalAugmentationAdvisor(None)
    with pytest.raises(ValueError, match=r"queryTransformers cannot contain null elements"):
        RetrievalAugmentationAdvisor(object(), query_transformers=[None])
    assert RetrievalAugmentationAdvisor(object()).order == 0
    assert RetrievalAugmentationAdvisor(object()).name == "RetrievalAugmentationAdvisor"


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_b22_with_the_real_message_chat_memory_advisor(store, mode):
    memory = MessageWindowChatMemory()
    await memory.aadd("c1", HISTORY)
    rewriter = ScriptedChatModel(["What is the population of Oslo?"])
    model = ScriptedChatModel(["About 700,000."])
    rag = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(store, top_k=1),
        query_transformers=[CompressionQueryTransformer(rewriter)],
    )
    client = ChatClient(model, default_advisors=[MessageChatMemoryAdvisor(memory), rag])
    spec = client.prompt("What about its population?").advisor_param(CONVERSATION_ID, "c1")
    if mode == "call":
        await spec.acall()
    else:
        await spec.stream().aggregate()
    assert "USER: Tell me about Oslo\nASSISTANT: Oslo is the capital of Norway.\n\n" in (
        rewriter.prompts[0].user_message.text
    )
    assert store.searches[0].query == "What is the population of Oslo?"
    assert model.prompts[0].user_message.text.endswith(
        "Query: What about its population?\n\nAnswer:\n"
    )
    stored = [m.text for m in await memory.aget("c1")]
    assert stored[-2:] == ["What about its population?", "About 700,000."]
