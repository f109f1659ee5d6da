"""CitationAdvisor: sources from retrieved documents into metadata, optional rendering."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisors_app.core import BaseAdvisor, ChatClient, ScriptedChatModel
from advisors_app.core.advisors import CitationAdvisor
from advisors_app.core.advisors.citation import CITATIONS

from .helpers import run, stream, texts

MODES = ["call", "stream"]


@dataclasses.dataclass(frozen=True)
class Doc:
    text: str
    metadata: dict[str, Any]
    id: str
    score: float | None = None


class FakeRetriever(BaseAdvisor):
    """Puts documents into the context as QuestionAnswerAdvisor / RAG do (order 0)."""

    def __init__(self, key: str, documents: list[Any]) -> None:
        self.key, self.documents = key, documents

    def before(self, request, chain):
        return request.mutate(context={self.key: self.documents})


DOCS = [
    Doc("Paris is the capital.", {"title": "France facts", "source": "kb://france"}, "d1", 0.9),
    Doc("Lyon is a city.", {}, "d2"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("key", ["qa_retrieved_documents", "rag_document_context"])
async def test_sources_go_to_metadata_and_context(mode, key):
    client = ChatClient(
        ScriptedChatModel(["Paris."]),
        default_advisors=[FakeRetriever(key, DOCS), CitationAdvisor()],
    )
    response = await run(mode, client, "Capital?")
    expected = [
        {"index": 1, "id": "d1", "title": "France facts", "source": "kb://france", "score": 0.9},
        {"index": 2, "id": "d2"},
    ]
    assert response.chat_response.metadata[CITATIONS] == expected
    assert response.context[CITATIONS] == expected
    assert response.chat_response.text == "Paris."


@pytest.mark.parametrize("mode", MODES)
async def test_rendered_citation_list(mode):
    client = ChatClient(
        ScriptedChatModel(["Paris."]),
        default_advisors=[
            FakeRetriever("qa_retrieved_documents", DOCS),
            CitationAdvisor(render=True),
        ],
    )
    response = await run(mode, client, "Capital?")
    assert response.chat_response.text == "Paris.\n\nSources:\n[1] France facts\n[2] d2"


async def test_rendered_list_streams_as_a_last_text_chunk():
    client = ChatClient(
        ScriptedChatModel([["Par", "is."]]),
        default_advisors=[
            FakeRetriever("qa_retrieved_documents", DOCS),
            CitationAdvisor(render=True),
        ],
    )
    assert texts(await stream(client, "Capital?")) == [
        "Par",
        "is.",
        "\n\nSources:\n[1] France facts\n[2] d2",
    ]


@pytest.mark.parametrize("mode", MODES)
async def test_no_documents_no_change(mode):
    client = ChatClient(
        ScriptedChatModel(["Paris."]), default_advisors=[CitationAdvisor(render=True)]
    )
    response = await run(mode, client, "Capital?")
    assert response.chat_response.text == "Paris."
    assert CITATIONS not in response.context
