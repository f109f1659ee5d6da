"""``cited_sources``: one entry per cited source, from documents or their JSON form."""

from __future__ import annotations

from advisors_app.core.vectorstore import Document
from advisors_app.turn.sources import cited_sources


def test_one_entry_per_source_with_its_best_score_in_retrieval_order() -> None:
    metadata = {
        "rag_document_context": [
            {"text": "a", "metadata": {"source": "pydoc:with", "title": "With"}, "score": 0.5},
            {"text": "b", "metadata": {"source": "pydoc:for", "title": "For"}, "score": 0.4},
            {"text": "c", "metadata": {"source": "pydoc:with", "title": "With"}, "score": 0.7},
        ],
        "other": [1, 2],
    }
    assert cited_sources(metadata) == [
        {
            "document_id": None,
            "title": "With",
            "source": "pydoc:with",
            "score": 0.7,
            "snippet": "c",
            "retrieval": None,
        },
        {
            "document_id": None,
            "title": "For",
            "source": "pydoc:for",
            "score": 0.4,
            "snippet": "b",
            "retrieval": None,
        },
    ]


def test_question_answer_documents_objects_and_missing_titles() -> None:
    metadata = {
        "qa_retrieved_documents": [
            Document("x", {"source": "faq.md"}, score=0.9, id="d1"),
            Document("y", {}),  # no source nor title: not citable
            Document("z", {"title": "Untitled"}),
        ]
    }
    result = cited_sources(metadata)
    assert result == [
        {
            "document_id": "d1",
            "title": "faq.md",
            "source": "faq.md",
            "score": 0.9,
            "snippet": "x",
            "retrieval": None,
        },
        {
            "document_id": result[1]["document_id"],
            "title": "Untitled",
            "source": "Untitled",
            "score": None,
            "snippet": "z",
            "retrieval": None,
        },
    ]
    assert (
        cited_sources(None)
        == cited_sources({})
        == cited_sources({"qa_retrieved_documents": 3})
        == []
    )


def test_a_source_says_how_the_search_found_its_chunk() -> None:
    how = {"mode": "hybrid", "vector_rank": 3, "lexical_rank": 1, "fused_score": 0.3}
    reranked = {**how, "rerank_score": 2.5, "internal": "not shown"}
    metadata = {
        "qa_retrieved_documents": [
            Document("x", {"source": "a.md", "retrieval": reranked}, score=0.8, id="d1"),
            Document("y", {"source": "b.md", "retrieval": "not a record"}, id="d2"),
        ]
    }
    first, second = cited_sources(metadata)
    assert first["retrieval"] == {**how, "rerank_score": 2.5}
    assert second["retrieval"] is None
