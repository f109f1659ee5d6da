"""``TokenTextSplitter``: chunks of at most N tokens with an overlap, cut at sentence ends.

Spring AI ``TokenTextSplitter`` (no overlap there). Tokens are counted with the core token
estimator (``cl100k_base``, offline). Chunk boundaries fall on character boundaries of the
original text (multi-byte characters such as Chinese are never cut), preferably after a
paragraph break, a line break or a sentence end (``.!?;`` and ``。！？；``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from typing import Any

from ..tokens import TiktokenTokenCountEstimator
from ..vectorstore import Document

__all__ = ["DEFAULT_CHUNK_OVERLAP", "DEFAULT_CHUNK_SIZE", "TokenTextSplitter"]

#: The default embedding model (all-MiniLM-L6-v2) reads at most 256 of its own tokens, which
#: is about 200 ``cl100k`` tokens of English: longer chunks would be embedded truncated.
DEFAULT_CHUNK_SIZE = 200
DEFAULT_CHUNK_OVERLAP = 40

_BREAKS = ("\n\n", "\n", "。", "！", "？", "；", ". ", "! ", "? ", "; ")


class TokenTextSplitter:
    """Splits documents into chunks of at most ``chunk_size`` tokens.

    Consecutive chunks share about ``chunk_overlap`` tokens. A chunk ends at the last break
    (paragraph, line, sentence) past ``min_chunk_chars`` characters (or past half the chunk,
    if that is shorter), else at the token limit.
    Chunks shorter than ``min_chunk_length_to_embed`` characters (after stripping) are
    dropped. Each chunk keeps its document's metadata plus ``chunk_index`` (0-based within the
    document). Raises ``ValueError`` for sizes that cannot work.
    """

    __slots__ = (
        "chunk_overlap",
        "chunk_size",
        "encoding",
        "min_chunk_chars",
        "min_chunk_length_to_embed",
    )

    def __init__(
        self,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        chunk_overlap: int = DEFAULT_CHUNK_OVERLAP,
        min_chunk_chars: int = 100,
        min_chunk_length_to_embed: int = 5,
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be greater than 0")
        if not 0 <= chunk_overlap < chunk_size:
            raise ValueError("chunk_overlap must be at least 0 and less than chunk_size")
        self.chunk_size = chunk_size
        self.chunk_overlap = chunk_overlap
        self.min_chunk_chars = min_chunk_chars
        self.min_chunk_length_to_embed = min_chunk_length_to_embed
        self.encoding: Any = TiktokenTokenCountEstimator()._encoding()

    def split_text(self, text: str) -> list[str]:
        """The chunks of ``text``, in order."""
        tokens = self.encoding.encode(text, disallowed_special=())
        if not tokens:
            return []
        decoded, offsets = self.encoding.decode_with_offsets(tokens)
        if decoded != text:
            offsets = _offsets_by_prefix(self.encoding, tokens)
        starts = [*offsets, len(text)]
        chunks: list[str] = []
        first = 0
        while first < len(tokens):
            last = min(first + self.chunk_size, len(tokens))
            begin, end = starts[first], starts[last]
            if last < len(tokens):
                cut = _last_break(text, begin + min(self.min_chunk_chars, (end - begin) // 2), end)
                if cut > begin:
                    end = cut
                    last = max(first + 1, bisect.bisect_left(starts, end, first, last))
                    end = starts[last] if starts[last] <= end else end
            chunk = text[begin:end].strip()
            if len(chunk) >= self.min_chunk_length_to_embed:
                chunks.append(chunk)
            if last >= len(tokens):
                break
            first = max(first + 1, last - self.chunk_overlap)
        return chunks

    def split(self, documents: Iterable[Document]) -> list[Document]:
        """Chunk every document (Spring's ``apply``); metadata gains ``chunk_index``."""
        chunks: list[Document] = []
        for document in documents:
            for index, text in enumerate(self.split_text(document.text)):
                chunks.append(Document(text, {**document.metadata, "chunk_index": index}))
        return chunks


def _last_break(text: str, lower: int, upper: int) -> int:
    """End of the last break in ``text[lower:upper]``, or -1."""
    best = -1
    for mark in _BREAKS:
        found = text.rfind(mark, lower, upper)
        if found >= 0:
            best = max(best, found + len(mark))
            if mark in ("\n\n",):
                return best
    return best


def _offsets_by_prefix(encoding: Any, tokens: Sequence[int]) -> list[int]:
    # Fallback when decode_with_offsets does not round-trip: character offset of each token
    # from the decoded length of the tokens before it.
    offsets, length = [], 0
    for token in tokens:
        offsets.append(length)
        length += len(encoding.decode_single_token_bytes(token).decode("utf-8", "ignore"))
    return offsets
