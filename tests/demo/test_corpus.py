"""The demo corpus: the reference's topics, each passage once, titled chunks that fit MiniLM."""

from __future__ import annotations

from pydoc_data.topics import topics as stdlib_topics

import pytest

from advisors_app.core.vectorstore import Document
from advisors_app.demo.chunking import CHUNK_OVERLAP, CHUNK_SIZE, TitledTextSplitter
from advisors_app.demo.corpus import corpus_fingerprint, python_reference_topics


@pytest.fixture(scope="module")
def topics():
    return {topic.name: topic for topic in python_reference_topics()}


def test_every_topic_is_kept_with_its_title_except_exact_duplicates(topics) -> None:
    assert set(stdlib_topics) - set(topics) == {"else"}  # the same text as "if"
    assert topics["with"].title == 'The "with" statement'
    assert topics["context-managers"].title == "With Statement Context Managers"
    assert topics["with"].text.startswith('The "with" statement is used to wrap the execution')
    assert "****" not in topics["with"].text and "====" not in topics["compound"].text


def test_a_passage_stays_only_in_the_narrowest_topic_that_holds_it(topics) -> None:
    passage = 'The context manager’s "__exit__()" method is invoked.'
    holders = [name for name, topic in topics.items() if passage in topic.text]
    assert holders == ["with"]
    # The chapter keeps what no narrower topic has.
    assert "Compound statements" in topics["compound"].title
    assert 'The "match" statement' in topics["compound"].text
    assert 'The "with" statement is used' not in topics["compound"].text
    assert "__enter__" in topics["context-managers"].text
    assert "__enter__" not in topics["specialnames"].text


def test_topics_of_a_synthetic_reference() -> None:
    reference = {
        "chapter": "Chapter\n*******\n\nIntro.\n\n\nSection\n=======\n\nBody of section.\n",
        "section": "Section\n*******\n\nBody of section.\n",
        "alias": "Section\n*******\n\nBody of section.\n",
        "empty": "Only\n****\n\n",
    }
    result = {t.name: (t.title, t.text) for t in python_reference_topics(reference)}
    # Equal topics: neither name is quoted in the title, so the alphabetically first stays.
    assert result == {"alias": ("Section", "Body of section."), "chapter": ("Chapter", "Intro.")}


def test_the_fingerprint_follows_the_text(topics) -> None:
    listed = list(topics.values())
    assert corpus_fingerprint(listed) == corpus_fingerprint(list(listed))
    changed = [*listed[:-1], type(listed[-1])(listed[-1].name, listed[-1].title, "other")]
    assert corpus_fingerprint(changed) != corpus_fingerprint(listed)


def test_chunks_leave_room_for_their_title_as_context_and_fit_the_budget(topics) -> None:
    splitter = TitledTextSplitter(CHUNK_SIZE, CHUNK_OVERLAP)
    topic = topics["with"]
    chunks = splitter.split([Document(topic.text, {"topic": "with", "title": topic.title})])
    assert len(chunks) > 1
    # The title is the chunk's context line (embedded with it), no longer part of its text.
    assert not any(c.text.startswith('The "with" statement\n\n') for c in chunks)
    assert [c.metadata["chunk_index"] for c in chunks] == list(range(len(chunks)))
    assert all(c.metadata["topic"] == "with" for c in chunks)
    embedded = [f"{topic.title}\n\n{c.text}" for c in chunks]
    assert all(len(splitter.encoding.encode(text)) <= CHUNK_SIZE for text in embedded)
    assert "__enter__" in chunks[0].metadata["identifiers"]


def test_a_document_without_title_is_split_plainly() -> None:
    splitter = TitledTextSplitter(50, 0)
    [chunk] = splitter.split([Document("Just one sentence.", {})])
    assert chunk.text == "Just one sentence."
    with pytest.raises(ValueError, match="more than half"):
        splitter.split([Document("text", {"title": "word " * 40})])
