"""With the real ToolCallingAdvisor (auto-registered, HIGHEST+300), the retrieval advisors
(order 0, inside the loop) search once per user turn and every round sees the context."""

from __future__ import annotations

import pytest

from advisors_app.core import ChatClient, ChatClientResponseAccumulator, ScriptedChatModel
from advisors_app.core.advisors import RETRIEVED_DOCUMENTS, QuestionAnswerAdvisor
from advisors_app.core.rag import (
    DOCUMENT_CONTEXT,
    RetrievalAugmentationAdvisor,
    VectorStoreDocumentRetriever,
)
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool
from advisors_app.core.vectorstore import Document, SearchRequest, SimpleVectorStore
from tests.embeddings import WordEmbeddingModel
from tests.retrieval import CountingStore


@tool
def weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@pytest.fixture
async def store():
    inner = SimpleVectorStore(WordEmbeddingModel())
    await inner.aadd([Document("Oslo is the capital of Norway.", id="oslo")])
    return CountingStore(inner)


async def run(spec, mode):
    if mode == "call":
        return await (await spec.acall()).achat_response()
    accumulator = ChatClientResponseAccumulator()
    async for chunk in spec.stream().chat_client_responses():
        accumulator.add(chunk)
    return accumulator.result().chat_response


@pytest.mark.parametrize("mode", ["call", "stream"])
@pytest.mark.parametrize("kind", ["qa", "rag"])
async def test_retrieval_once_per_turn_across_tool_rounds(store, mode, kind):
    if kind == "qa":
        advisor, key = QuestionAnswerAdvisor(store, SearchRequest(top_k=1)), RETRIEVED_DOCUMENTS
    else:
        retriever = VectorStoreDocumentRetriever(store, top_k=1)
        advisor, key = RetrievalAugmentationAdvisor(retriever), DOCUMENT_CONTEXT
    model = ScriptedChatModel(
        [
            tool_call_response(("weather", {"city": "Oslo"})),
            tool_call_response(("weather", {"city": "Bergen"})),
            "Sunny in both.",
        ]
    )
    spec = ChatClient(model, default_advisors=[advisor]).prompt("Weather in Norway's capital?")
    response = await run(spec.tools(weather), mode)
    assert response.text == "Sunny in both."
    assert len(store.searches) == 1
    assert len(model.prompts) == 3
    texts = {p.user_message.text for p in model.prompts}
    assert len(texts) == 1 and "Oslo is the capital of Norway." in texts.pop()
    assert [d.id for d in response.metadata[key]] == ["oslo"]
