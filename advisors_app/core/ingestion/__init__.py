"""Ingestion without Django: readers (text, Markdown, HTML, PDF) and a token-aware splitter."""

from __future__ import annotations

from .readers import (
    SUPPORTED_SUFFIXES,
    read_document,
    read_file,
    read_html,
    read_markdown,
    read_pdf,
    read_text,
)
from .splitter import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, TokenTextSplitter

__all__ = [
    "DEFAULT_CHUNK_OVERLAP",
    "DEFAULT_CHUNK_SIZE",
    "SUPPORTED_SUFFIXES",
    "TokenTextSplitter",
    "read_document",
    "read_file",
    "read_html",
    "read_markdown",
    "read_pdf",
    "read_text",
]
