"""How the demo corpus is cut into chunks: token-aware, each chunk headed by its topic's title.

A chunk such as ``with``'s third one reads ``The "with" statement\\n\\n<text>``: the title
tells the embedding model (and the chat model reading the context) what the passage is about
even when the passage itself never names it. The title's tokens count against the chunk
budget of 200 ``cl100k`` tokens, about all-MiniLM-L6-v2's 256-token window for English
prose. Tables and grammar rules cost the embedding model more tokens than ``cl100k``: 38 of
the 551 chunks of Python 3.11's reference are longer than its window, and only their first
256 tokens are embedded (the chat model still reads them whole).
"""

from __future__ import annotations

from collections.abc import Iterable

from advisors_app.core.ingestion import TokenTextSplitter
from advisors_app.core.vectorstore import Document

__all__ = ["CHUNK_OVERLAP", "CHUNK_SIZE", "TitledTextSplitter"]

#: Tokens (``cl100k``) per chunk, title included.
CHUNK_SIZE = 200
#: Tokens repeated between neighbouring chunks of a topic. None: chunks end at paragraph or
#: line breaks, and an overlap would start the next chunk mid-sentence.
CHUNK_OVERLAP = 0


class TitledTextSplitter(TokenTextSplitter):
    """A :class:`TokenTextSplitter` that heads each chunk with ``metadata["title"]``.

    Documents without a title are split as the plain splitter does. ``chunk_size`` counts
    the heading too; a title longer than half the budget raises ``ValueError``.
    """

    __slots__ = ()

    def split(self, documents: Iterable[Document]) -> list[Document]:
        chunks: list[Document] = []
        for document in documents:
            title = str(document.metadata.get("title") or "").strip()
            heading = f"{title}\n\n" if title else ""
            budget = self.chunk_size - len(self.encoding.encode(heading, disallowed_special=()))
            if budget < self.chunk_size // 2:
                raise ValueError(f"title {title!r} takes more than half of a chunk")
            splitter = TokenTextSplitter(
                budget, min(self.chunk_overlap, budget - 1), self.min_chunk_chars
            )
            for index, text in enumerate(splitter.split_text(document.text)):
                chunks.append(Document(heading + text, {**document.metadata, "chunk_index": index}))
        return chunks
