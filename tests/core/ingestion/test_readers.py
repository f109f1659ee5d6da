"""Readers: plain text, Markdown sections, HTML visible text, PDF pages, dispatch by type."""

from __future__ import annotations

import io

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from advisors_app.core.ingestion import (
    read_document,
    read_file,
    read_html,
    read_markdown,
    read_pdf,
    read_text,
)


def test_text_is_one_document_with_its_source():
    [document] = read_text(b"hello\r\nworld", "a.txt")
    assert document.text == "hello\nworld"
    assert document.metadata == {"source": "a.txt"}
    assert read_text("  \n", "blank.txt") == []
    with pytest.raises(ValueError, match=r"bad.txt is not UTF-8 text"):
        read_text(b"\xff\xfe\xfa", "bad.txt")
    with pytest.raises(ValueError, match=r"nul.txt is not text: it holds NUL characters"):
        read_text("a\x00b", "nul.txt")


def test_markdown_is_split_by_headings_not_by_code():
    source = (
        "Intro line.\n\n# Oslo\n\nCapital of Norway.\n\n```sh\n# not a heading\n```\n\n"
        "## Population\n\nAbout 700,000.\n"
    )
    documents = read_markdown(source, "oslo.md")
    assert [(d.metadata["section"], d.text) for d in documents] == [
        ("", "Intro line."),
        ("Oslo", "# Oslo\n\nCapital of Norway.\n\n```sh\n# not a heading\n```"),
        ("Population", "## Population\n\nAbout 700,000."),
    ]
    assert all(d.metadata["source"] == "oslo.md" for d in documents)


def test_html_keeps_visible_text_and_the_title():
    page = (
        "<html><head><title>Oslo</title><style>p{color:red}</style></head><body>"
        "<script>alert('x')</script><h1>Oslo</h1><p>Capital of <b>Norway</b>.</p>"
        "\n\n\n<p>About 700,000.</p></body></html>"
    )
    [document] = read_html(page, "oslo.html")
    assert document.metadata == {"source": "oslo.html", "title": "Oslo"}
    assert "alert" not in document.text and "color" not in document.text
    assert "Capital of" in document.text and "About 700,000." in document.text
    assert "\n\n\n" not in document.text


def pdf_with_pages(*texts: str) -> bytes:
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for text in texts:
        page = writer.add_blank_page(612, 792)
        stream = DecodedStreamObject()
        stream.set_data(f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode())
        page[NameObject("/Contents")] = writer._add_object(stream)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def test_pdf_is_one_document_per_page():
    documents = read_pdf(pdf_with_pages("Hello page one", "", "Page three"), "doc.pdf")
    assert [(d.metadata["page"], d.text) for d in documents] == [
        (1, "Hello page one"),
        (3, "Page three"),
    ]
    with pytest.raises(ValueError, match=r"broken.pdf is not a readable PDF"):
        read_pdf(b"not a pdf", "broken.pdf")


def test_pdf_text_loses_the_nul_characters_extraction_leaves():
    [document] = read_pdf(pdf_with_pages("Hel\\000lo"), "nul.pdf")
    assert document.text == "Hello"


def test_dispatch_by_suffix_or_content_type(tmp_path):
    assert read_document(b"# T\n\nx", "notes.MD")[0].metadata["section"] == "T"
    assert read_document(b"<p>x</p>", "upload", "text/html; charset=utf-8")[0].text == "x"
    with pytest.raises(ValueError, match=r"cannot read .a.docx.: supported types are \.txt"):
        read_document(b"x", "a.docx")
    path = tmp_path / "a.txt"
    path.write_text("file text")
    assert read_file(path)[0].metadata["source"] == "a.txt"
