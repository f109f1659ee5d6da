"""The demo's hybrid retrieval (issue 41): the identifier questions, the chain's defaults, and
the two questions of the issue answered from the chunk that names the identifier."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from advisors_app.core.vectorstore import Document
from advisors_app.demo import loader
from advisors_app.demo.chunking import CHUNK_OVERLAP, CHUNK_SIZE, TitledTextSplitter
from advisors_app.demo.corpus import python_reference_topics
from advisors_app.demo.dataset import IDENTIFIER_DATASET_FILE
from advisors_app.evaluation.datasets import parse_items
from advisors_app.models import Collection
from advisors_app.models import Document as DocumentRow

ISSUE_QUESTIONS = {
    "What does expandtabs do with tab characters?": "expandtabs",
    "What must __aenter__ return?": "__aenter__",
}


def identifier_items() -> list[dict]:
    return parse_items(json.loads(IDENTIFIER_DATASET_FILE.read_text(encoding="utf-8")))


def test_forty_or_more_identifier_questions_each_answered_by_a_chunk_of_the_corpus() -> None:
    items = identifier_items()
    assert len(items) >= 40
    splitter = TitledTextSplitter(CHUNK_SIZE, CHUNK_OVERLAP)
    held = set()
    for topic in python_reference_topics():
        for chunk in splitter.split([Document(topic.text, {"title": topic.title})]):
            held.update(chunk.metadata["identifiers"])
    for item in items:
        [identifier] = item["expected"]["documents"]["identifiers"]
        assert identifier in held, item["key"]
        assert identifier in item["input"]["message"].lower(), item["key"]
    assert {question for question in ISSUE_QUESTIONS} <= {i["input"]["message"] for i in items}


def test_the_python_docs_chain_runs_hybrid_with_reranking_by_default() -> None:
    advisors = {kind: params for kind, params, _ in loader._CHAINS[loader.MAIN_CHAIN]["advisors"]}
    retrieval = advisors["retrieval_augmentation"]
    assert retrieval["search_mode"] == "hybrid"
    assert retrieval["rerank"] == {"top_n": 20, "method": "bm25"}


def test_chunks_keep_the_title_as_their_context_not_their_text() -> None:
    topic = next(t for t in python_reference_topics() if t.name == "with")
    splitter = TitledTextSplitter(CHUNK_SIZE, CHUNK_OVERLAP)
    [first, *_] = splitter.split([Document(topic.text, {"title": topic.title})])
    assert not first.text.startswith(topic.title + "\n\n")


@pytest.mark.django_db(transaction=True)
async def test_the_issue_questions_are_answered_from_the_right_chunk(demo: Collection) -> None:
    from asgiref.sync import sync_to_async

    from advisors_app.definition.runtime import load_chain
    from advisors_app.demo.retrieval import chain_retriever

    compiled = await sync_to_async(load_chain)(loader.MAIN_CHAIN)
    retriever = chain_retriever(compiled.advisors)
    assert retriever.options["search_mode"] == "hybrid" and retriever.reranker is not None
    for question, identifier in ISSUE_QUESTIONS.items():
        documents = await retriever.search(question, retriever.top_k)
        assert any(identifier in d.metadata["identifiers"] for d in documents), question
        assert all("retrieval" in d.metadata for d in documents)


@pytest.mark.django_db
def test_the_demo_collection_is_hybrid_with_its_title_as_context(demo: Collection) -> None:
    assert Collection.objects.get(slug=loader.COLLECTION).search_mode == "hybrid"
    row = DocumentRow.objects.filter(collection=demo, metadata__topic="with").first()
    assert row is not None and row.context == 'The "with" statement'
    assert not row.content.startswith(row.context + "\n\n")


@pytest.mark.django_db
def test_retrieval_tune_prints_its_table_and_writes_the_best(demo: Collection) -> None:
    from advisors_app.demo.dataset import IDENTIFIER_DATASET

    Collection.objects.filter(slug=loader.COLLECTION).update(search_mode="vector")
    out = io.StringIO()
    call_command("retrieval_tune", loader.COLLECTION, IDENTIFIER_DATASET, "--quick", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0].startswith("setting")
    assert len([line for line in lines if line.startswith(("vector", "lexical", "hybrid"))]) == 4
    assert lines[2].startswith(("hybrid", "lexical"))  # best first: vector alone misses most
    collection = Collection.objects.get(slug=loader.COLLECTION)
    assert collection.search_mode in ("hybrid", "lexical")
