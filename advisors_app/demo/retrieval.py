"""Retrieval quality of a chain: hit@k of its retriever on questions with known answers.

:func:`chain_retriever` takes the retrieval advisor of a built chain (``QuestionAnswerAdvisor``
or ``RetrievalAugmentationAdvisor`` over a ``VectorStoreDocumentRetriever``) and keeps what
its searches use: the vector store (collection and embedding model), ``top_k``, similarity
threshold, default filter, search mode and reranker. :func:`evaluate` asks each question through
that store, with ``top_k`` raised to the largest k measured (the reranker, if any, re-orders
its ``top_n`` candidates first, as in a turn), and counts a hit at k when one of the first k
chunks comes from the expected topic (``metadata["topic"]``). Query transformers and
expanders of a modular RAG advisor are not applied: this measures the search itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advisors_app.core.advisors.question_answer import QuestionAnswerAdvisor
from advisors_app.core.rag import (
    DocumentReranker,
    RetrievalAugmentationAdvisor,
    VectorStoreDocumentRetriever,
    rerank_top_k,
)
from advisors_app.core.vectorstore import Filter, SearchRequest, VectorStore, resolve_filter

__all__ = [
    "QUESTIONS_FILE",
    "ChainRetriever",
    "Question",
    "RetrievalReport",
    "chain_retriever",
    "evaluate",
    "load_questions",
]

#: The demo's questions: ``{"questions": [{"question": ..., "topic": ...}, ...]}``.
QUESTIONS_FILE = Path(__file__).with_name("questions.json")


@dataclass(frozen=True, slots=True)
class Question:
    """A question and the ``topic`` metadata value of the chunks that answer it."""

    question: str
    topic: str


def load_questions(path: str | Path = QUESTIONS_FILE) -> list[Question]:
    """The questions of a JSON file; ``ValueError`` naming the entry when one is malformed."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    entries = data.get("questions") if isinstance(data, dict) else data
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list under 'questions'")
    questions = []
    for index, entry in enumerate(entries):
        if not (
            isinstance(entry, dict)
            and isinstance(entry.get("question"), str)
            and isinstance(entry.get("topic"), str)
        ):
            raise ValueError(f"{path}: entry {index} needs a 'question' and a 'topic' string")
        questions.append(Question(entry["question"], entry["topic"]))
    return questions


@dataclass(frozen=True)
class ChainRetriever:
    """What a chain's retrieval advisor searches with (see the module docstring)."""

    vector_store: VectorStore
    top_k: int
    similarity_threshold: float
    filter_expression: Filter | None
    advisor: str
    #: ``SearchRequest`` fields the advisor sets (``search_mode``, ``ef_search``, weights).
    options: dict[str, Any] = field(default_factory=dict)
    reranker: DocumentReranker | None = None
    rerank_top_n: int = 20

    async def search(self, query: str, top_k: int) -> list[Any]:
        request = SearchRequest(
            query=query,
            top_k=top_k if self.reranker is None else max(top_k, self.rerank_top_n),
            similarity_threshold=self.similarity_threshold,
            filter_expression=self.filter_expression,
            **self.options,
        )
        found = await self.vector_store.asimilarity_search(request)
        if self.reranker is None:
            return found
        return await rerank_top_k(self.reranker, query, found, top_k)


_OPTIONS = ("ef_search", "search_mode", "vector_weight", "lexical_weight", "rrf_k")


def chain_retriever(advisors: Sequence[Any]) -> ChainRetriever:
    """The retriever of the first retrieval advisor in ``advisors`` (a built chain's).

    Raises ``ValueError`` when there is none, or when a ``RetrievalAugmentationAdvisor``
    uses a retriever other than ``VectorStoreDocumentRetriever``.
    """
    for advisor in advisors:
        if isinstance(advisor, QuestionAnswerAdvisor):
            search = advisor.search_request
            return ChainRetriever(
                advisor.vector_store,
                search.top_k,
                search.similarity_threshold,
                search.filter_expression,
                advisor.name,
                {name: getattr(search, name) for name in _OPTIONS},
                advisor.reranker,
                advisor.rerank_top_n,
            )
        if isinstance(advisor, RetrievalAugmentationAdvisor):
            retriever = advisor.document_retriever
            if not isinstance(retriever, VectorStoreDocumentRetriever):
                raise ValueError(
                    f"{advisor.name} retrieves with {type(retriever).__name__}; only "
                    "VectorStoreDocumentRetriever can be checked"
                )
            source = retriever.filter_expression
            if callable(source) and not isinstance(source, Filter):
                source = source()
            return ChainRetriever(
                retriever.vector_store,
                retriever.top_k,
                retriever.similarity_threshold,
                resolve_filter(source, "filter_expression"),
                advisor.name,
                {name: getattr(retriever, name) for name in _OPTIONS},
                retriever.reranker,
                retriever.rerank_top_n,
            )
    raise ValueError(
        "the chain has no retrieval advisor (question_answer or retrieval_augmentation)"
    )


@dataclass
class RetrievalReport:
    """Hits per k over the questions, and each question's retrieved topics (best first)."""

    ks: tuple[int, ...]
    questions: list[Question]
    retrieved: list[list[str]] = field(default_factory=list)

    def hits(self, k: int) -> int:
        """How many questions have a chunk of their topic among the first ``k`` results."""
        pairs = zip(self.questions, self.retrieved, strict=True)
        return sum(q.topic in got[:k] for q, got in pairs)

    def rate(self, k: int) -> float:
        """``hits(k)`` over the number of questions (0.0 with no question)."""
        return self.hits(k) / len(self.questions) if self.questions else 0.0

    def misses(self, k: int) -> list[tuple[Question, list[str]]]:
        return [
            (q, got)
            for q, got in zip(self.questions, self.retrieved, strict=True)
            if q.topic not in got[:k]
        ]


async def evaluate(
    retriever: ChainRetriever, questions: Sequence[Question], ks: Sequence[int] = (1, 5)
) -> RetrievalReport:
    """Search each question (top ``max(ks)``) and record the topics found, in order."""
    wanted = tuple(sorted(set(ks)))
    report = RetrievalReport(wanted, list(questions))
    for question in questions:
        documents = await retriever.search(question.question, max(wanted))
        report.retrieved.append([str(d.metadata.get("topic", "")) for d in documents])
    return report
