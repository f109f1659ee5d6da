"""Word lists and prompt templates: declared placeholders match the text's real fields."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from advisors_app.models import PromptTemplate, SensitiveWordList

pytestmark = pytest.mark.django_db


def test_declared_placeholders_must_be_in_the_text() -> None:
    template = PromptTemplate(
        slug="qa", text="Context: {context}", placeholders=["context", "query"]
    )
    with pytest.raises(ValidationError) as caught:
        template.full_clean()
    assert caught.value.message_dict == {
        "placeholders": ["The following placeholders must be present in the prompt template: query"]
    }


def test_placeholders_used_by_the_text_must_be_declared() -> None:
    template = PromptTemplate(slug="qa", text="{query} with {context}", placeholders=["query"])
    with pytest.raises(ValidationError, match="not declared: context"):
        template.full_clean()


def test_literal_braces_and_json_are_not_placeholders() -> None:
    text = 'Answer {query} as {{"answer": "..."}} or {"k": 1} { spaced }'
    template = PromptTemplate(slug="json", text=text, placeholders=[" query ", "query"])
    template.full_clean()
    assert template.placeholders == ["query"]


def test_word_lists_drop_duplicates_and_refuse_blank_words_and_emptiness() -> None:
    words = SensitiveWordList(slug="bad", words=["bomb", " bomb ", "gun"])
    words.full_clean()
    assert words.words == ["bomb", "gun"]
    words.words = ["ok", "  "]
    with pytest.raises(ValidationError, match="Words cannot be blank"):
        words.full_clean()
    words.words = []
    with pytest.raises(ValidationError, match="Enter at least one word"):
        words.full_clean()
