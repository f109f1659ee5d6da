"""How the demo corpus is cut into chunks: token-aware, each chunk's context its topic's title.

A chunk of ``with`` is embedded and indexed as ``The "with" statement\\n\\n<text>``: the title
tells the embedding model (and the keyword index) what the passage is about even when the
passage itself never names it. The title is the chunk's context line (the ingestion
pipeline's default: the ``title`` metadata), stored apart from the text users and the chat
model see. Its tokens count against the chunk budget of 200 ``cl100k`` tokens, about
all-MiniLM-L6-v2's 256-token window for English prose. Tables and grammar rules cost the
embedding model more tokens than ``cl100k``: 38 of the 551 chunks of Python 3.11's reference
are longer than its window, and only their first 256 tokens are embedded (the chat model
still reads them whole).
"""

from __future__ import annotations

from collections.abc import Iterable

from advisors_app.core.ingestion import TokenTextSplitter
from advisors_app.core.vectorstore import Document, identifier_terms

__all__ = ["CHUNK_OVERLAP", "CHUNK_SIZE", "TitledTextSplitter"]

#: Tokens (``cl100k``) per chunk, title included.
CHUNK_SIZE = 200
#: Tokens repeated between neighbouring chunks of a topic. None: chunks end at paragraph or
#: line breaks, and an overlap would start the next chunk mid-sentence.
CHUNK_OVERLAP = 0


class TitledTextSplitter(TokenTextSplitter):
    """A :class:`TokenTextSplitter` that keeps room in each chunk for ``metadata["title"]``,
    the chunk's context line, and lists the chunk's identifiers in ``metadata["identifiers"]``
    (:func:`~advisors_app.core.vectorstore.identifier_terms`: what the demo's identifier
    questions are judged by).

    Documents without a title are split as the plain splitter does. ``chunk_size`` counts
    the title too; a title longer than half the budget raises ``ValueError``.
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
                metadata = {
                    **document.metadata,
                    "chunk_index": index,
                    "identifiers": identifier_terms(text),
                }
                chunks.append(Document(text, metadata))
        return chunks
