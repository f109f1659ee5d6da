"""Reranking (issue 41): the order rerankers give, the candidates the retrieval advisors ask
for (top_n, at least top_k) and the top_k they keep, and identifier terms."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from advisors_app.core.advisors.question_answer import RETRIEVED_DOCUMENTS, QuestionAnswerAdvisor
from advisors_app.core.client import ChatClient
from advisors_app.core.providers.scripted import ScriptedChatModel
from advisors_app.core.rag import (
    Bm25Reranker,
    DecisionDocumentReranker,
    Query,
    VectorStoreDocumentRetriever,
)
from advisors_app.core.vectorstore import (
    RETRIEVAL,
    Document,
    SearchRequest,
    SimpleVectorStore,
    exact_term,
    identifier_terms,
    lexical_text,
)
from tests.embeddings import WordEmbeddingModel
from tests.retrieval import CountingStore

CANDIDATES = [
    Document("co_names is a tuple of the names used by the bytecode.", id="names"),
    Document("Frames and code objects have many attributes.", id="frames"),
    Document("co_varnames is a tuple of the names of the local variables.", id="varnames"),
]


async def test_bm25_puts_the_candidate_holding_the_identifier_first() -> None:
    reranked = await Bm25Reranker(weight=2.0).rerank("What does co_varnames hold?", CANDIDATES)
    assert [d.id for d in reranked] == ["varnames", "names", "frames"]
    scores = [d.metadata[RETRIEVAL]["rerank_score"] for d in reranked]
    assert scores == sorted(scores, reverse=True)


async def test_by_default_the_search_order_weighs_more_than_bm25() -> None:
    """The shipped weight (0.5, measured best on the demo) lets BM25 move a candidate past
    its neighbour, not over the whole list."""
    reranked = await Bm25Reranker().rerank("What does co_varnames hold?", CANDIDATES)
    assert [d.id for d in reranked] == ["names", "varnames", "frames"]


async def test_bm25_keeps_the_incoming_order_when_the_query_says_nothing_new() -> None:
    reranked = await Bm25Reranker().rerank("zzz", CANDIDATES)
    assert [d.id for d in reranked] == ["names", "frames", "varnames"]


@dataclass
class Decision:
    choice: str
    probability: float


class KeywordDecisionModel:
    """Answers "yes" with 0.9 when the passage holds the keyword, else "no" with 0.8."""

    def __init__(self, keyword: str) -> None:
        self.keyword = keyword
        self.questions: list[str] = []

    async def decide(self, question, text, choices=None):
        self.questions.append(question)
        return Decision("yes", 0.9) if self.keyword in text else Decision("no", 0.8)


async def test_a_decision_model_orders_by_its_probability_of_yes() -> None:
    model = KeywordDecisionModel("local variables")
    reranked = await DecisionDocumentReranker(model).rerank("co_varnames?", CANDIDATES)
    assert reranked[0].id == "varnames"
    assert reranked[0].metadata[RETRIEVAL]["rerank_score"] == pytest.approx(0.9)
    assert reranked[1].metadata[RETRIEVAL]["rerank_score"] == pytest.approx(0.2)
    assert model.questions[0] == "Does this passage answer the question 'co_varnames?'?"


def test_a_decision_reranker_needs_a_decision_model() -> None:
    with pytest.raises(ValueError, match="decide"):
        DecisionDocumentReranker(object())


@pytest.fixture
async def store() -> CountingStore:
    inner = SimpleVectorStore(WordEmbeddingModel())
    await inner.aadd(CANDIDATES)
    return CountingStore(inner)


async def test_the_retriever_asks_for_top_n_and_keeps_top_k(store: CountingStore) -> None:
    retriever = VectorStoreDocumentRetriever(
        store, top_k=1, reranker=Bm25Reranker(weight=5.0), rerank_top_n=3, search_mode="hybrid"
    )
    [document] = await retriever.retrieve(Query("What does co_varnames hold?"))
    [search] = store.searches
    assert (search.top_k, search.search_mode) == (3, "hybrid")
    assert document.id == "varnames"


async def test_the_question_answer_advisor_reranks_before_keeping_top_k(store) -> None:
    advisor = QuestionAnswerAdvisor(
        store, SearchRequest(top_k=1), reranker=Bm25Reranker(weight=5.0), rerank_top_n=3
    )
    client = ChatClient(ScriptedChatModel(["answer"]), default_advisors=[advisor])
    response = await client.prompt("What does co_varnames hold?").acall()
    documents = response.chat_response().metadata[RETRIEVED_DOCUMENTS]
    assert [d.id for d in documents] == ["varnames"]
    assert store.searches[0].top_k == 3


@pytest.mark.parametrize("top_n", [0, True, "20"])
def test_a_bad_top_n_is_refused(store, top_n) -> None:
    with pytest.raises(ValueError, match="rerank_top_n"):
        VectorStoreDocumentRetriever(store, reranker=Bm25Reranker(), rerank_top_n=top_n)


def test_identifier_terms_keep_underscores_and_dots() -> None:
    text = "Call str.casefold(); define __init_subclass__; read co_varnames and os.path.join."
    assert identifier_terms(text) == [
        "str.casefold",
        "casefold",
        "__init_subclass__",
        "co_varnames",
        "os.path.join",
        "path.join",
        "join",
    ]
    assert exact_term("co_varnames") != exact_term("co_names")
    assert exact_term("a_z") != exact_term("az_")
    lexical = lexical_text(text)
    assert lexical.words.endswith("casefold join")
    assert exact_term("__init_subclass__") in lexical.exact.split()
