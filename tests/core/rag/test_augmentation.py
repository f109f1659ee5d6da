"""ContextualQueryAugmenter: Spring's templates verbatim, empty context both ways (B21), escaped
documents by default (issue 18)."""

from __future__ import annotations

import pytest

from advisors_app.core.rag import (
    ContextualQueryAugmenter,
    Query,
    join_document_texts,
    xml_document_formatter,
)
from advisors_app.core.vectorstore import Document

EMPTY = (
    "The user query is outside your knowledge base.\n"
    "Politely inform the user that you can't answer it.\n"
)


def test_renders_springs_default_template_exactly_with_springs_formatter():
    query = Query("Who? {context}", context={"k": 1})
    augmenter = ContextualQueryAugmenter(document_formatter=join_document_texts)
    result = augmenter.augment(query, [Document("A {query}"), Document("B")])
    assert result.text == (
        "Context information is below.\n\n---------------------\nA {query}\nB\n"
        "---------------------\n\n"
        "Given the context information and no prior knowledge, answer the query.\n\n"
        "Follow these rules:\n\n"
        "1. If the answer is not in the context, just say that you don't know.\n"
        '2. Avoid statements like "Based on the context..." or "The provided information...".\n\n'
        "Query: Who? {context}\n\nAnswer:\n"
    )
    assert result.context == {"k": 1}


def test_b21_empty_context_both_settings():
    query = Query("What is the capital of France?")
    assert ContextualQueryAugmenter().augment(query, []).text == EMPTY
    assert ContextualQueryAugmenter(allow_empty_context=True).augment(query, []) is query
    custom = ContextualQueryAugmenter(empty_context_prompt_template="No docs for: {query}")
    assert custom.augment(query, []).text == "No docs for: What is the capital of France?"


def test_custom_templates_formatter_and_validation():
    augmenter = ContextualQueryAugmenter(
        prompt_template="{context}|{query}", document_formatter=xml_document_formatter
    )
    assert augmenter.augment(Query("q"), [Document("<x>")]).text == (
        "<document>&lt;x&gt;</document>|q"
    )
    with pytest.raises(ValueError, match=r"placeholders must be present.*context"):
        ContextualQueryAugmenter(prompt_template="query and context: {query}")
    with pytest.raises(ValueError, match=r"query cannot be null"):
        ContextualQueryAugmenter().augment(None, [])
    with pytest.raises(ValueError, match=r"documents cannot be null"):
        ContextualQueryAugmenter().augment(Query("q"), None)
