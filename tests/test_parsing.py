"""Bounded reading of uploads (issue 18): pages, decompressed bytes, characters, CPU time; a
hostile or malformed PDF is a clear error naming the file and the setting, never anything else."""

from __future__ import annotations

import time

import pytest

from advisors_app.ingestion.parsing import (
    CpuBudget,
    LimitExceeded,
    Limits,
    check_supported,
    read_upload,
)
from tests.hostile_pdfs import bomb_pdf, shared_stream_pdf, text_pdf

MB = 1024 * 1024


def test_an_ordinary_pdf_is_one_document_per_page() -> None:
    documents = read_upload(text_pdf("Hello page one", "", "Page three"), "doc.pdf")
    assert [(d.text, dict(d.metadata)) for d in documents] == [
        ("Hello page one", {"source": "doc.pdf", "page": 1}),
        ("Page three", {"source": "doc.pdf", "page": 3}),
    ]


def test_the_settings_are_the_default_limits(settings) -> None:
    settings.ADVISORS = {"INGESTION_MAX_PAGES": 7, "MAX_CHUNKS_PER_COLLECTION": 9}
    assert Limits.from_settings() == Limits(7, 32 * MB, 1_000_000, 300.0, 0)
    assert Limits.from_settings(quotas=True).max_chunks == 9
    assert Limits.from_dict({**Limits(1, 2, 3, 4.0, 5).as_dict(), "x": 1}) == Limits(
        1, 2, 3, 4.0, 5
    )


def test_the_200_page_shared_stream_pdf_stops_at_the_character_limit_at_once() -> None:
    started = time.monotonic()
    with pytest.raises(LimitExceeded) as raised:
        read_upload(shared_stream_pdf(), "jack.pdf", limits=Limits.from_settings())
    assert raised.value.setting == "INGESTION_MAX_CHARS"
    assert str(raised.value) == (
        "jack.pdf holds more than 1000000 characters of text by page 2 of 200 "
        "(ADVISORS['INGESTION_MAX_CHARS'])"
    )
    assert time.monotonic() - started < 20  # two pages of work, not two hundred


def test_each_page_counts_the_content_it_draws_against_the_decompressed_bytes() -> None:
    limits = Limits(max_decompressed_bytes=3 * MB)  # 1.1 MB of shared content per page
    with pytest.raises(
        LimitExceeded, match=r"jack.pdf inflates to more than 3145728 bytes of page"
    ) as raised:
        read_upload(shared_stream_pdf(), "jack.pdf", limits=limits)
    assert "by page 3 of 200" in str(raised.value)
    assert raised.value.setting == "INGESTION_MAX_DECOMPRESSED_BYTES"


def test_the_cpu_budget_stops_a_pdf_whatever_it_does() -> None:
    started = time.monotonic()
    with pytest.raises(LimitExceeded) as raised:
        read_upload(shared_stream_pdf(), "jack.pdf", limits=Limits(cpu_seconds=2))
    assert str(raised.value) == (
        "the job used more than 2 s of CPU time reading jack.pdf "
        "(ADVISORS['INGESTION_CPU_SECONDS'])"
    )
    assert time.monotonic() - started < 15


@pytest.mark.parametrize("limit", [32 * MB, 0])
def test_a_pdf_bomb_is_a_limit_whatever_the_setting(limit: int) -> None:
    """With our limit or none (pypdf's own, 75 MB): ``LimitReachedError`` never escapes."""
    with pytest.raises(LimitExceeded) as raised:
        read_upload(bomb_pdf(), "bomb.pdf", limits=Limits(max_decompressed_bytes=limit))
    assert str(raised.value).startswith(
        "bomb.pdf passes a PDF reading limit: Limit reached while decompressing."
    )
    assert raised.value.setting == "INGESTION_MAX_DECOMPRESSED_BYTES"


def test_too_many_pages() -> None:
    with pytest.raises(LimitExceeded, match=r"^long.pdf has 4 pages, more than 3 \(ADVISORS"):
        read_upload(text_pdf("a", "b", "c", "d"), "long.pdf", limits=Limits(max_pages=3))


@pytest.mark.parametrize(
    "data",
    [b"not a pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\ntrailer<<>>"],
)
def test_a_malformed_pdf_is_a_value_error_naming_it(data: bytes) -> None:
    with pytest.raises(ValueError, match=r"^broken.pdf is not a readable PDF: ") as raised:
        read_upload(data, "broken.pdf")
    assert not isinstance(raised.value, LimitExceeded)


def test_text_is_held_to_the_character_limit_and_the_budget() -> None:
    with pytest.raises(LimitExceeded, match=r"^a.md holds 11 characters of text, more than 10 "):
        read_upload(b"# Hello you", "a.md", limits=Limits(max_chars=10))
    assert [d.text for d in read_upload(b"# Hi", "a.md", as_text=True)] == ["# Hi"]
    spent = CpuBudget(1e-9)
    sum(range(100_000))
    with pytest.raises(LimitExceeded, match=r"CPU time reading a.txt"):
        read_upload(b"hello", "a.txt", budget=spent)


def test_supported_types_are_checked_before_reading() -> None:
    check_supported("a.PDF")
    check_supported("upload", "text/markdown; charset=utf-8")
    with pytest.raises(ValueError, match=r"^cannot read 'a.exe': supported types are \.txt"):
        check_supported("a.exe", "application/octet-stream")
