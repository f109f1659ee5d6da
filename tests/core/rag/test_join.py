"""ConcatenationDocumentJoiner: dedup by id, stable score order, duplicate queries."""

from __future__ import annotations

import pytest

from advisors_app.core.rag import ConcatenationDocumentJoiner, Query
from advisors_app.core.vectorstore import Document


def doc(doc_id, score):
    return Document(doc_id, id=doc_id, score=score)


def test_dedup_keeps_first_and_sorts_by_score_stably():
    joined = ConcatenationDocumentJoiner().join(
        [
            (Query("a"), [doc("1", 0.5), doc("2", 0.9), doc("3", None)]),
            (Query("a"), [doc("2", 0.1), doc("4", 0.5)]),
            (Query("b"), [[doc("5", 0.5)], [doc("6", 0.0)]]),
        ]
    )
    assert [(d.id, d.score) for d in joined] == [
        ("2", 0.9),
        ("1", 0.5),
        ("4", 0.5),
        ("5", 0.5),
        ("3", None),
        ("6", 0.0),
    ]


def test_mapping_input_and_springs_null_messages():
    joiner = ConcatenationDocumentJoiner()
    assert [d.id for d in joiner.join({Query("a"): [doc("1", 1.0)]})] == ["1"]
    with pytest.raises(ValueError, match=r"documentsForQuery cannot be null"):
        joiner.join(None)
    with pytest.raises(ValueError, match=r"cannot contain null keys"):
        joiner.join([(None, [])])
    with pytest.raises(ValueError, match=r"cannot contain null values"):
        joiner.join([(Query("a"), None)])
