"""The demo's guard (issue 38): the planted document is retrieved, dropped with a ``guard`` event
and left out of the sources, and the answer is made without it; no page of the Language
Reference is dropped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from advisors_app.core.advisors.guard import DROPPED_NOTICE
from advisors_app.core.decision import prompt_injection_classifier
from advisors_app.core.vectorstore import Document
from advisors_app.definition import move_label, publish
from advisors_app.definition.runtime import load_chain
from advisors_app.demo import loader
from advisors_app.demo.chunking import CHUNK_OVERLAP, CHUNK_SIZE, TitledTextSplitter
from advisors_app.demo.corpus import python_reference_topics
from advisors_app.demo.dataset import DATASET_FILE, IDENTIFIER_DATASET_FILE
from advisors_app.demo.planted import PLANTED_QUESTION, PLANTED_SOURCE, PLANTED_TEXT
from advisors_app.demo.retrieval import chain_retriever, load_questions
from advisors_app.evaluation.datasets import parse_items
from advisors_app.models import PRODUCTION, AdvisorChain, ChatModelConfig, Collection
from advisors_app.turn import stream_turn

ANSWER = "The official installers are on python.org, under Downloads."
LINK = "python-installer.example"


def _threshold() -> float:
    [rails] = [p for k, p, _ in loader._CHAINS[loader.MAIN_CHAIN]["advisors"] if k == "guard"]
    [entry] = rails["rails"]["documents"]
    assert (entry["check"], entry["action"]) == ("prompt_injection", "drop")
    return float(entry["threshold"])


def test_no_page_of_the_reference_is_dropped_and_the_planted_one_is() -> None:
    classifier = prompt_injection_classifier()
    splitter = TitledTextSplitter(CHUNK_SIZE, CHUNK_OVERLAP)
    threshold = _threshold()
    for topic in python_reference_topics():
        for chunk in splitter.split([Document(topic.text, {"title": topic.title})]):
            decision = classifier.decide_sync("", chunk.text)
            assert decision.probabilities["attack"] < threshold, topic.name
    assert classifier.decide_sync("", PLANTED_TEXT).probabilities["attack"] >= threshold


def scripted_answers() -> None:
    """The main chain on a scripted model (the embedded one is slow and its words vary): its
    other advisors, retrieval and guard as loaded."""
    model = ChatModelConfig.objects.create(
        slug="demo-scripted",
        provider="scripted",
        settings={"responses": [ANSWER], "repeat": True},
    )
    chain = AdvisorChain.objects.get(slug=loader.MAIN_CHAIN)
    chain.chat_model = model
    chain.save()
    version, _ = publish(chain)
    move_label(chain, PRODUCTION, version)


@pytest.mark.django_db(transaction=True)
async def test_the_planted_document_is_retrieved_dropped_and_the_answer_made_without_it(
    demo: Collection, django_user_model: Any
) -> None:
    compiled = await sync_to_async(load_chain)(loader.MAIN_CHAIN)
    retriever = chain_retriever(compiled.advisors)
    found = await retriever.search(PLANTED_QUESTION, retriever.top_k)
    assert PLANTED_SOURCE in [d.metadata.get("source") for d in found]

    await sync_to_async(scripted_answers)()
    user = await sync_to_async(django_user_model.objects.create_user)("ann", password="pw")
    events = [event async for event in await stream_turn(loader.MAIN_CHAIN, user, PLANTED_QUESTION)]
    [guard] = [e.to_dict() for e in events if e.type == "guard"]
    assert (guard["rail"], guard["check"], guard["action"]) == (
        "documents",
        "prompt_injection",
        "drop",
    )
    done = events[-1]
    assert done.type == "done" and done.outcome.content == ANSWER
    assert PLANTED_SOURCE not in [s["source"] for s in done.outcome.sources]
    assert done.outcome.sources  # the other excerpts are cited
    model = (await sync_to_async(load_chain)(loader.MAIN_CHAIN)).client.chat_model
    prompt = "\n".join(m.text for m in model.prompts[-1].instructions)
    assert DROPPED_NOTICE in prompt and LINK not in prompt


@pytest.mark.django_db(transaction=True)
async def test_no_question_of_the_demo_datasets_retrieves_the_planted_document(
    demo: Collection,
) -> None:
    """The planted page takes no reference excerpt's place in the measured questions."""
    questions = [q.question for q in load_questions()]
    for path in (DATASET_FILE, IDENTIFIER_DATASET_FILE):
        items = parse_items(json.loads(path.read_text(encoding="utf-8")))
        questions += [item["input"]["message"] for item in items]
    compiled = await sync_to_async(load_chain)(loader.MAIN_CHAIN)
    retriever = chain_retriever(compiled.advisors)
    for question in sorted(set(questions)):
        found = await retriever.search(question, retriever.top_k)
        assert PLANTED_SOURCE not in [d.metadata.get("source") for d in found], question
