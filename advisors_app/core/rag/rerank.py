"""Rerankers: re-order a search's top candidates before the top ``k`` are kept.

Spring AI 2.1 reranks with a ``DocumentPostProcessor`` (``DecisionDocumentReranker``: a decision
model asked whether each passage answers the question). Here a :class:`DocumentReranker` is
given the query and the fused top ``top_n`` of a search (``top_n`` ≥ ``top_k``) and returns
them re-ordered, each with ``metadata["retrieval"]["rerank_score"]``; the retrieval advisors
keep the first ``top_k`` (:func:`rerank_top_k`).

Shipped:

* :class:`Bm25Reranker` (``"bm25"``, the default): BM25 of the query over the candidates
  themselves — a word most candidates share says little about which one answers, an identifier
  one of them holds says a lot — fused by rank with the search's own order. No model, no
  weights: no cross-encoder with ONNX weights and a licence allowing redistribution was found
  in a package (docs/retrieval.md, "Reranking"), and this one measured better than the one
  packaged ONNX reranker tried.
* :class:`DecisionDocumentReranker`: Spring AI 2.1's, over any decision model with
  ``decide(question, text, choices)`` returning a choice and its probability (the guards'
  ``DecisionModel``), ordering by the probability that the passage answers the question.
"""

from __future__ import annotations

import inspect
import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..vectorstore import RETRIEVAL, Document
from ..vectorstore.lexical import identifier_terms

__all__ = [
    "DEFAULT_RERANKER",
    "RERANKERS",
    "Bm25Reranker",
    "DecisionDocumentReranker",
    "DocumentReranker",
    "rerank_top_k",
]

# Words that carry no topic in a question (English; other words are compared as they are).
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "me",
        "my",
        "no",
        "not",
        "of",
        "on",
        "or",
        "our",
        "should",
        "than",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "to",
        "was",
        "we",
        "what",
        "when",
        "which",
        "who",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
    ]
)
_WORD = re.compile(r"\w+(?:\.\w+)*")
_PARTS = re.compile(r"[_.]+")


def _terms(text: str) -> list[str]:
    """The words of ``text`` that count, lower-cased; an identifier also by its parts and, when
    dotted, by its dotted tails (``str.casefold`` → ``casefold``)."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        terms.append(word)
        if "_" in word or "." in word:
            terms.extend(p for p in _PARTS.split(word) if p and p not in _STOPWORDS)
            if "." in word:
                terms.extend(term for term in identifier_terms(word)[1:] if "." in term)
    return terms


def _scored(document: Document, score: float) -> Document:
    how = dict(document.metadata.get(RETRIEVAL) or {})
    how["rerank_score"] = score
    return document.with_metadata({RETRIEVAL: how})


class DocumentReranker:
    """Re-orders candidates for a query: ``await rerank(query, documents)`` returns the same
    documents, best first, each with ``metadata["retrieval"]["rerank_score"]``."""

    __slots__ = ()

    async def rerank(self, query: str, documents: Sequence[Document]) -> list[Document]:
        raise NotImplementedError


class Bm25Reranker(DocumentReranker):
    """BM25 over the candidates, fused by rank with their incoming order (see the module
    docstring): ``1 / (k + incoming rank) + weight / (k + BM25 rank)``; the sum is the
    ``rerank_score``. ``k1`` and ``b`` are BM25's. Pure Python: 20 candidates of 200 tokens
    take about 2 ms on two cores."""

    __slots__ = ("b", "k", "k1", "weight")

    def __init__(self, weight: float = 0.5, k: int = 20, k1: float = 1.2, b: float = 0.75):
        if weight < 0 or k < 1:
            raise ValueError("weight must be ≥ 0 and k ≥ 1")
        self.weight = weight
        self.k = k
        self.k1 = k1
        self.b = b

    def scores(self, query: str, texts: Sequence[str]) -> list[float]:
        """BM25 of ``query`` for each of ``texts``, document frequencies taken over ``texts``."""
        documents = [_terms(text) for text in texts]
        if not documents:
            return []
        average = sum(map(len, documents)) / len(documents) or 1.0
        frequency = Counter(term for terms in documents for term in set(terms))
        wanted = set(_terms(query))
        scores = []
        for terms in documents:
            counts = Counter(terms)
            score = 0.0
            for term in wanted:
                tf = counts[term]
                if tf:
                    df = frequency[term]
                    idf = math.log(1 + (len(documents) - df + 0.5) / (df + 0.5))
                    norm = self.k1 * (1 - self.b + self.b * len(terms) / average)
                    score += idf * tf * (self.k1 + 1) / (tf + norm)
            scores.append(score)
        return scores

    async def rerank(self, query: str, documents: Sequence[Document]) -> list[Document]:
        listed = list(documents)
        bm25 = self.scores(query, [d.text for d in listed])
        by_bm25 = sorted(range(len(listed)), key=lambda i: (-bm25[i], i))
        bm25_rank = {index: rank for rank, index in enumerate(by_bm25, start=1)}
        fused = [
            1.0 / (self.k + index + 1) + self.weight / (self.k + bm25_rank[index])
            for index in range(len(listed))
        ]
        order = sorted(range(len(listed)), key=lambda i: (-fused[i], i))
        return [_scored(listed[i], fused[i]) for i in order]


#: The question :class:`DecisionDocumentReranker` asks by default (Spring AI 2.1's idea).
DEFAULT_DECISION_QUESTION = "Does this passage answer the question {query!r}?"


class DecisionDocumentReranker(DocumentReranker):
    """Orders candidates by a decision model's probability that each answers the query
    (Spring AI 2.1 ``DecisionDocumentReranker``).

    ``decision_model``: any object with ``decide(question, text, choices=None)`` (plain or
    ``async``) returning something with ``choice`` and ``probability`` (the guards'
    ``DecisionModel`` and ``Decision``). ``question`` is formatted with ``query``. The
    ``rerank_score`` is the probability of ``"yes"`` (``1 - probability`` when the model
    chose ``"no"``). One decision per candidate, in order.
    """

    __slots__ = ("decision_model", "question")

    def __init__(self, decision_model: Any, question: str = DEFAULT_DECISION_QUESTION) -> None:
        if decision_model is None or not callable(getattr(decision_model, "decide", None)):
            raise ValueError("decisionModel must have a decide(question, text, choices) method")
        self.decision_model = decision_model
        self.question = question

    async def _probability_yes(self, question: str, text: str) -> float:
        decision = self.decision_model.decide(question, text, ["yes", "no"])
        if inspect.isawaitable(decision):
            decision = await decision
        probability = float(decision.probability)
        return probability if str(decision.choice).lower() == "yes" else 1.0 - probability

    async def rerank(self, query: str, documents: Sequence[Document]) -> list[Document]:
        question = self.question.format(query=query)
        listed = list(documents)
        scores = [await self._probability_yes(question, d.text) for d in listed]
        order = sorted(range(len(listed)), key=lambda i: (-scores[i], i))
        return [_scored(listed[i], scores[i]) for i in order]


#: Rerankers the ``rerank`` advisor param can name (``{"top_n": 20, "method": "bm25"}``).
RERANKERS: Mapping[str, Callable[[], DocumentReranker]] = {"bm25": Bm25Reranker}
DEFAULT_RERANKER = "bm25"


async def rerank_top_k(
    reranker: DocumentReranker, query: str, documents: Sequence[Document], top_k: int
) -> list[Document]:
    """The first ``top_k`` of ``documents`` (a search's top ``top_n``) once reranked."""
    if not documents:
        return []
    return (await reranker.rerank(query, documents))[:top_k]
