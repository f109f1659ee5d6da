"""Document readers: plain text, Markdown, HTML and PDF into :class:`Document` s.

Spring AI's ``TextReader``, ``MarkdownDocumentReader``, ``JsoupDocumentReader`` and
``PagePdfDocumentReader``, on ``markdown-it-py``, ``beautifulsoup4`` and ``pypdf``. Every
document's metadata has ``source`` (the name given); Markdown sections add ``section`` (the
heading), HTML adds ``title``, PDF pages add ``page`` (1-based). Empty parts are skipped.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from ..vectorstore import Document

__all__ = [
    "SUPPORTED_SUFFIXES",
    "read_document",
    "read_file",
    "read_html",
    "read_markdown",
    "read_pdf",
    "read_text",
]

_BLANK_LINES = re.compile(r"\n\s*\n\s*\n+")


def _metadata(source: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"source": source, **(extra or {})}


def decode_text(data: bytes | str, source: str) -> str:
    """``data`` as text: UTF-8 (a BOM is dropped); ``ValueError`` naming ``source`` otherwise.

    Text holding a NUL character is refused too: it is binary data, and no database stores it.
    """
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            raise ValueError(f"{source} is not UTF-8 text: {error}") from error
    if "\x00" in data:
        raise ValueError(f"{source} is not text: it holds NUL characters")
    return data


def read_text(data: bytes | str, source: str) -> list[Document]:
    """One document with the whole text (none when it is blank)."""
    text = decode_text(data, source).replace("\r\n", "\n")
    return [Document(text, _metadata(source))] if text.strip() else []


def read_markdown(data: bytes | str, source: str) -> list[Document]:
    """One document per heading section, the heading text in ``metadata["section"]``.

    Text before the first heading is a section named ``""``. Section bodies keep their
    Markdown source; headings inside code blocks are not headings.
    """
    from markdown_it import MarkdownIt

    text = decode_text(data, source).replace("\r\n", "\n")
    lines = text.split("\n")
    tokens = MarkdownIt("commonmark").parse(text)
    starts: list[tuple[int, str]] = [(0, "")]
    for index, token in enumerate(tokens):
        if token.type == "heading_open" and token.map is not None:
            title = tokens[index + 1].content if index + 1 < len(tokens) else ""
            starts.append((token.map[0], title))
    documents = []
    for number, (start, title) in enumerate(starts):
        end = starts[number + 1][0] if number + 1 < len(starts) else len(lines)
        body = "\n".join(lines[start:end]).strip()
        if body:
            documents.append(Document(body, _metadata(source, {"section": title})))
    return documents


def read_html(data: bytes | str, source: str) -> list[Document]:
    """One document with the page's visible text; ``<title>`` in ``metadata["title"]``.

    Scripts, styles and templates are dropped; runs of blank lines collapse to one.
    """
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decode_text(data, source), "html.parser")
    for element in soup(["script", "style", "noscript", "template"]):
        element.decompose()
    title = soup.title.get_text(strip=True) if soup.title else ""
    if soup.title:
        soup.title.decompose()
    lines = (line.strip() for line in soup.get_text("\n").split("\n"))
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    if not text:
        return []
    return [Document(text, _metadata(source, {"title": title} if title else None))]


def read_pdf(data: bytes, source: str) -> list[Document]:
    """One document per page with text, ``metadata["page"]`` the 1-based page number.

    Raises ``ValueError`` naming ``source`` when the file is not a readable PDF.
    """
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        # Extraction can leave NULs where a font maps no character; they are not text.
        pages = [(page.extract_text() or "").replace("\x00", "") for page in reader.pages]
    except (PdfReadError, ValueError, KeyError) as error:
        raise ValueError(f"{source} is not a readable PDF: {error}") from error
    return [
        Document(text.strip(), _metadata(source, {"page": number}))
        for number, text in enumerate(pages, start=1)
        if text.strip()
    ]


_READERS = {
    ".txt": read_text,
    ".text": read_text,
    ".rst": read_text,
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".html": read_html,
    ".htm": read_html,
    ".pdf": read_pdf,
}
#: File name endings :func:`read_document` understands.
SUPPORTED_SUFFIXES = tuple(_READERS)

_CONTENT_TYPES = {
    "text/plain": ".txt",
    "text/markdown": ".md",
    "text/html": ".html",
    "application/pdf": ".pdf",
}


def read_document(
    data: bytes | str, source: str, content_type: str | None = None
) -> list[Document]:
    """Read ``data`` with the reader for ``source``'s suffix (or ``content_type``).

    Raises ``ValueError`` naming the supported types for anything else.
    """
    suffix = Path(source).suffix.lower()
    if suffix not in _READERS and content_type:
        suffix = _CONTENT_TYPES.get(content_type.split(";")[0].strip().lower(), suffix)
    reader = _READERS.get(suffix)
    if reader is None:
        raise ValueError(
            f"cannot read {source!r}: supported types are {', '.join(SUPPORTED_SUFFIXES)}"
        )
    if reader is read_pdf and isinstance(data, str):
        raise ValueError(f"{source} is a PDF: pass its bytes, not text")
    return reader(data, source)  # type: ignore[arg-type]


def read_file(path: str | Path, source: str | None = None) -> list[Document]:
    """Read the file at ``path``; ``source`` defaults to the file name."""
    path = Path(path)
    return read_document(path.read_bytes(), source or path.name)
