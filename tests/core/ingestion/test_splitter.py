"""TokenTextSplitter: token limits, overlap, sentence boundaries, CJK text, metadata."""

from __future__ import annotations

import itertools

import pytest

from advisors_app.core.ingestion import TokenTextSplitter
from advisors_app.core.vectorstore import Document

SENTENCES = " ".join(f"Sentence number {i} talks about topic {i % 7}." for i in range(80))


def test_chunks_respect_the_token_limit_and_overlap():
    splitter = TokenTextSplitter(chunk_size=50, chunk_overlap=10, min_chunk_chars=20)
    chunks = splitter.split_text(SENTENCES)
    assert len(chunks) > 5
    assert all(len(splitter.encoding.encode(c)) <= 50 for c in chunks)
    assert all(c.endswith(".") for c in chunks[:-1])
    for previous, current in itertools.pairwise(chunks):
        assert current.split()[0] in previous
    assert chunks[0].startswith("Sentence number 0")
    assert chunks[-1].endswith("topic 2.")


def test_cjk_text_is_cut_on_characters_and_sentence_ends():
    text = "奥斯陆是挪威的首都。" * 40 + "人口大约七十万！" * 30
    splitter = TokenTextSplitter(chunk_size=40, chunk_overlap=8)
    chunks = splitter.split_text(text)
    assert len(chunks) > 3
    assert not any("\ufffd" in c for c in chunks)
    assert all(c[-1] in "。！" for c in chunks)
    assert all(c in text for c in chunks)


def test_split_documents_keeps_metadata_and_numbers_chunks():
    splitter = TokenTextSplitter(chunk_size=30, chunk_overlap=5)
    chunks = splitter.split([Document(SENTENCES[:600], {"source": "a.md"}), Document("tiny text")])
    assert [c.metadata["chunk_index"] for c in chunks if c.metadata.get("source")] == list(
        range(len(chunks) - 1)
    )
    assert chunks[-1].text == "tiny text" and chunks[-1].metadata == {"chunk_index": 0}
    assert splitter.split_text("") == [] and splitter.split_text("ab") == []


def test_invalid_sizes():
    with pytest.raises(ValueError, match="chunk_size must be greater than 0"):
        TokenTextSplitter(chunk_size=0)
    with pytest.raises(ValueError, match="chunk_overlap must be at least 0 and less than"):
        TokenTextSplitter(chunk_size=10, chunk_overlap=10)
