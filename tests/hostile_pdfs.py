"""PDFs that attack a reader, built with pypdf itself (issue 18's reproductions).

- :func:`shared_stream_pdf`: every page draws the same large content stream, so text
  extraction parses it once per page (the tester's 109 KB, 200-page file took 77 s of CPU).
- :func:`bomb_pdf`: one page whose content stream inflates far past pypdf's decompression
  limit (``LimitReachedError``) from a few hundred KB.
- :func:`text_pdf`: an ordinary PDF, one line of text per page.
"""

from __future__ import annotations

import io
import zlib

from pypdf import PdfWriter
from pypdf.generic import DictionaryObject, NameObject, StreamObject

__all__ = ["bomb_pdf", "shared_stream_pdf", "text_pdf"]


def _resources(writer: PdfWriter) -> object:
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    fonts = DictionaryObject({NameObject("/F1"): font})
    return writer._add_object(DictionaryObject({NameObject("/Font"): fonts}))


def _flate(data: bytes) -> StreamObject:
    stream = StreamObject()
    stream.set_data(zlib.compress(data, 9))
    stream[NameObject("/Filter")] = NameObject("/FlateDecode")
    return stream


def _pdf(pages: int, content: list[StreamObject] | StreamObject) -> bytes:
    writer = PdfWriter()
    resources = _resources(writer)
    shared = writer._add_object(content) if isinstance(content, StreamObject) else None
    for number in range(pages):
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = resources
        page[NameObject("/Contents")] = shared or writer._add_object(content[number])  # type: ignore[index]
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def shared_stream_pdf(pages: int = 200, lines: int = 20_000) -> bytes:
    """``pages`` pages drawing one content stream of ``lines`` lines of text (~57 bytes each)."""
    line = b"(All work and no play makes Jack a dull boy) Tj 0 -14 Td "
    return _pdf(pages, _flate(b"BT /F1 12 Tf 72 720 Td " + line * lines + b"ET"))


def bomb_pdf(inflated: int = 100_000_000) -> bytes:
    """One page whose content stream inflates to ``inflated`` bytes (spaces)."""
    return _pdf(1, _flate(b" " * inflated))


def text_pdf(*texts: str) -> bytes:
    """One page per text, each drawn as one line."""
    streams = [_flate(f"BT /F1 12 Tf 72 720 Td ({t}) Tj ET".encode()) for t in texts]
    return _pdf(len(texts), streams)
