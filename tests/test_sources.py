"""``cited_sources``: one entry per cited source, from documents or their JSON form."""

from __future__ import annotations

from advisors_app.core.vectorstore import Document
from advisors_app.sources import cited_sources


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
        {"title": "With", "source": "pydoc:with", "score": 0.7},
        {"title": "For", "source": "pydoc:for", "score": 0.4},
    ]


def test_question_answer_documents_objects_and_missing_titles() -> None:
    metadata = {
        "qa_retrieved_documents": [
            Document("x", {"source": "faq.md"}, score=0.9),
            Document("y", {}),  # no source nor title: not citable
            Document("z", {"title": "Untitled"}),
        ]
    }
    assert cited_sources(metadata) == [
        {"title": "faq.md", "source": "faq.md", "score": 0.9},
        {"title": "Untitled", "source": "Untitled", "score": None},
    ]
    assert (
        cited_sources(None)
        == cited_sources({})
        == cited_sources({"qa_retrieved_documents": 3})
        == []
    )
