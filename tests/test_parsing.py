"""Bounded reading of uploads (issues 18 and 36): pages, decompressed bytes, characters, memory,
CPU time; a hostile or malformed file of any format is a clear error naming the file and the
setting, never anything else, and is read in a child process the kernel holds to the limits."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from advisors_app.conf import DEFAULTS
from advisors_app.ingestion.parsing import (
    CHILD_MEMORY_BYTES,
    CpuBudget,
    LimitExceeded,
    Limits,
    check_supported,
    read_upload,
)
from tests.helpers import subprocess_env
from tests.hostile_pdfs import bomb_pdf, shared_stream_pdf, text_pdf
from tests.live_server import ROOT

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
    with pytest.raises(LimitExceeded) as raised:
        read_upload(shared_stream_pdf(), "jack.pdf", limits=Limits.from_settings())
    assert raised.value.setting == "INGESTION_MAX_CHARS"
    assert str(raised.value) == (
        "jack.pdf holds more than 1000000 characters of text by page 2 of 200 "
        "(ADVISORS['INGESTION_MAX_CHARS'])"
    )  # "by page 2 of 200": two pages of work, not two hundred


def test_each_page_counts_the_content_it_draws_against_the_decompressed_bytes() -> None:
    limits = Limits(max_decompressed_bytes=3 * MB)  # 1.1 MB of shared content per page
    with pytest.raises(
        LimitExceeded, match=r"jack.pdf inflates to more than 3145728 bytes of page"
    ) as raised:
        read_upload(shared_stream_pdf(), "jack.pdf", limits=limits)
    assert "by page 3 of 200" in str(raised.value)
    assert raised.value.setting == "INGESTION_MAX_DECOMPRESSED_BYTES"


def test_the_cpu_budget_stops_a_pdf_whatever_it_does() -> None:
    with pytest.raises(LimitExceeded) as raised:
        read_upload(shared_stream_pdf(), "jack.pdf", limits=Limits(cpu_seconds=2))
    assert str(raised.value) == (
        "the job used more than 2 s of CPU time reading jack.pdf "
        "(ADVISORS['INGESTION_CPU_SECONDS'])"
    )


def test_the_kernel_ends_a_reader_at_its_cpu_time_before_it_reads_to_the_end() -> None:
    """What tells the budget's error apart from a reader that read all 200 pages and was
    judged afterwards: the kernel's ``SIGXCPU`` ended the reading child (run as
    :func:`read_upload` runs it)."""
    request = {
        "name": "jack.pdf",
        "kind": "pdf",
        "content_type": "application/pdf",
        "parent": os.getpid(),
        **Limits(cpu_seconds=1).as_dict(),
    }
    reader = subprocess.run(
        [sys.executable, "-m", "advisors_app.ingestion.parsing", json.dumps(request)],
        input=shared_stream_pdf(),
        capture_output=True,
        env=subprocess_env(PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert reader.returncode == -signal.SIGXCPU, reader.stderr.decode()
    assert reader.stdout == b""  # no answer: it was stopped mid-read


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
    with pytest.raises(LimitExceeded, match=r"CPU time before reading a.txt"):
        read_upload(b"hello", "a.txt", budget=spent)


def test_supported_types_are_checked_before_reading() -> None:
    check_supported("a.PDF")
    check_supported("upload", "text/markdown; charset=utf-8")
    with pytest.raises(ValueError, match=r"^cannot read 'a.exe': supported types are \.txt"):
        check_supported("a.exe", "application/octet-stream")


# -- every format in the bounded child (issue 36) -------------------------------------------------

CHILD_MEMORY = 256 * MB


def test_an_html_bomb_is_a_memory_limit_and_its_reader_stays_within_it() -> None:
    """10 MB of nested tags took the worker to 2.3 GB for 54 s: now a child reads it, and the
    kernel holds the child to the limit. Measured in a fresh process whose only child is the
    reader (``RUSAGE_CHILDREN``: the peak resident memory of its children); its own peak is
    its ``VmHWM`` (Linux carries ``ru_maxrss`` across ``exec``, so pytest's would count)."""
    script = f"""
import json, re
from pathlib import Path
from resource import RUSAGE_CHILDREN, getrusage
from advisors_app.ingestion.parsing import LimitExceeded, Limits, read_upload
try:
    read_upload(b"<div>" * {10 * MB // 5}, "bomb.html", limits=Limits(memory_bytes={CHILD_MEMORY}))
except LimitExceeded as error:
    outcome = [str(error), error.setting]
status = Path("/proc/self/status").read_text()
print(json.dumps({{
    "outcome": outcome,
    "reader": getrusage(RUSAGE_CHILDREN).ru_maxrss * 1024,
    "parent": int(re.search(r"VmHWM:\\s+(\\d+) kB", status)[1]) * 1024,
}}))
"""
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        env=subprocess_env(PYTHONPATH=str(ROOT)),
        check=False,
    )
    assert run.returncode == 0, run.stderr.decode()
    report = json.loads(run.stdout)
    assert report["outcome"] == [
        f"bomb.html needs more than {CHILD_MEMORY} bytes of memory to read "
        "(ADVISORS['INGESTION_MEMORY_BYTES'])",
        "INGESTION_MEMORY_BYTES",
    ]
    assert 0 < report["reader"] <= CHILD_MEMORY
    assert report["parent"] < 200 * MB  # the 10 MB file and the interpreter, nothing parsed


def test_markdown_html_and_text_are_read_in_the_child_as_before() -> None:
    limits = Limits(memory_bytes=CHILD_MEMORY)
    read = read_upload(b"intro\n# A\n\nb\n# C\nd", "a.md", limits=limits)
    assert [(d.text, dict(d.metadata)) for d in read] == [
        ("intro", {"source": "a.md", "section": ""}),
        ("# A\n\nb", {"source": "a.md", "section": "A"}),
        ("# C\nd", {"source": "a.md", "section": "C"}),
    ]
    page = b"<title>T</title><p>caf\xc3\xa9</p><script>x()</script>"
    [html] = read_upload(page, "upload", "text/html; charset=utf-8", limits=limits)
    assert (html.text, dict(html.metadata)) == ("caf\u00e9", {"source": "upload", "title": "T"})
    assert read_upload(b"  \n", "blank.txt") == []
    with pytest.raises(ValueError, match=r"^c.txt is not UTF-8 text") as raised:
        read_upload(b"\xff\xfe\xfa", "c.txt")
    assert not isinstance(raised.value, LimitExceeded)


def test_an_answer_larger_than_its_text_allows_is_a_limit() -> None:
    """The child's answer (text and metadata) is bounded by the character limit too: 20,000
    one-character sections pass ``max_chars`` but not the bytes their answer may take."""
    sections = b"#\n" * 20_000
    with pytest.raises(LimitExceeded) as raised:
        read_upload(sections, "many.md", limits=Limits(max_chars=20_000))
    assert raised.value.setting == "INGESTION_MAX_CHARS"
    assert str(raised.value).startswith("many.md reads into more than 225536 bytes of text")


def test_the_memory_default_bounds_jobs_stored_before_the_setting() -> None:
    assert Limits.from_dict({"max_chars": 5}).memory_bytes == DEFAULTS["INGESTION_MEMORY_BYTES"]
    assert Limits().memory_bytes == CHILD_MEMORY_BYTES == 1024**3
