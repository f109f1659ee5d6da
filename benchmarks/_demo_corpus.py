"""The demo's real text for the benchmarks: its questions and its retrieval excerpts.

The ``python-docs`` demo answers questions (``advisors_app/demo/questions.json``) from chunks of
the Python Language Reference (``pydoc_data.topics``, cut by the demo's own
:class:`~advisors_app.demo.chunking.TitledTextSplitter`, 200 tokens each with room for the
topic's title, which is the chunk's context line, not part of its text). The benchmarks that
need a retrieval collection or a demo-sized prompt take both from here, so what they measure is
what a demo turn carries. Nothing is downloaded.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisors_app.core.vectorstore import Document
from advisors_app.demo.chunking import CHUNK_OVERLAP, CHUNK_SIZE, TitledTextSplitter
from advisors_app.demo.corpus import python_reference_topics
from advisors_app.demo.loader import CONTEXT_TEMPLATE_TEXT, SYSTEM_PROMPT

__all__ = ["DEMO_SYSTEM_PROMPT", "demo_chunks", "demo_questions", "excerpt_prompt"]

_QUESTIONS = Path(__file__).resolve().parent.parent / "advisors_app/demo/questions.json"


def demo_questions() -> list[tuple[str, str]]:
    """``(question, pydoc topic that answers it)`` of the demo, in the file's order."""
    data = json.loads(_QUESTIONS.read_text())
    return [(q["question"], q["topic"]) for q in data["questions"]]


def demo_chunks(topics: int | None = None) -> list[Document]:
    """The demo collection's chunks (metadata ``topic``, ``title``, ``source``) of the topics
    the first ``topics`` distinct questions ask about (``None``: every question's topic)."""
    wanted: list[str] = []
    for _, topic in demo_questions():
        if topic not in wanted:
            wanted.append(topic)
    wanted = wanted[:topics] if topics is not None else wanted
    by_name = {t.name: t for t in python_reference_topics()}
    splitter = TitledTextSplitter(CHUNK_SIZE, CHUNK_OVERLAP)
    chunks: list[Document] = []
    for name in wanted:
        topic = by_name.get(name)
        if topic is None:
            continue
        document = Document(
            topic.text, {"topic": name, "title": topic.title, "source": f"pydoc:{name}"}
        )
        chunks.extend(splitter.split([document]))
    return chunks


def excerpt_prompt(question: str, topic: str, chunks: list[Document], k: int = 3) -> str:
    """The user message of a demo turn: the demo's context template filled with ``k``
    excerpts — the topic's first chunks, then the chunks that follow them in ``chunks``."""
    first = next((i for i, c in enumerate(chunks) if c.metadata["topic"] == topic), 0)
    picked = (chunks[first:] + chunks[:first])[:k]
    context = "\n\n".join(c.text for c in picked)
    return CONTEXT_TEMPLATE_TEXT.format(query=question, context=context)


#: The demo chain's system prompt (``advisors_app.demo.loader.SYSTEM_PROMPT``).
DEMO_SYSTEM_PROMPT = SYSTEM_PROMPT
