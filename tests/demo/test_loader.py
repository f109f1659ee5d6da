"""``load_demo``: every row once, fast when loaded, edits kept, ``--force`` restores."""

from __future__ import annotations

import io
from decimal import Decimal

import pytest
from django.core.management import call_command

from advisors_app.definition import check_draft
from advisors_app.definition.runtime import load_chain
from advisors_app.demo import loader
from advisors_app.demo.corpus import python_reference_topics
from advisors_app.demo.loader import load_demo
from advisors_app.models import (
    AdvisorChain,
    ChatModelConfig,
    Collection,
    Document,
    EmbeddingModelConfig,
    ModelPrice,
    PromptTemplate,
    SensitiveWordList,
)

pytestmark = pytest.mark.django_db


def few(*names: str) -> list:
    return [t for t in python_reference_topics() if t.name in names]


def counts() -> dict[str, int]:
    return {
        "chains": AdvisorChain.objects.count(),
        "chat models": ChatModelConfig.objects.count(),
        "embedding models": EmbeddingModelConfig.objects.count(),
        "word lists": SensitiveWordList.objects.count(),
        "templates": PromptTemplate.objects.count(),
        "collections": Collection.objects.count(),
        "prices": ModelPrice.objects.count(),
        "documents": Document.objects.count(),
    }


def test_a_second_run_creates_and_embeds_nothing() -> None:
    topics = few("pass", "with", "async")
    first = load_demo(topics=topics)
    # 3 models, the demo price, word list, 2 templates, collection, 3 chains
    assert len(first.created) == 11
    price = ModelPrice.objects.get(chat_model__slug="smollm2-135m-instruct")
    assert price.input_per_million == Decimal("0.15")
    assert first.embedded == first.chunks == Document.objects.count() > 3
    before = counts()
    second = load_demo(topics=topics)
    assert second.created == [] and second.embedded == 0 and second.collection_up_to_date
    assert counts() == before
    sources = set(Document.objects.values_list("source", flat=True))
    assert sources == {"pydoc:pass", "pydoc:with", "pydoc:async"}
    chunk = Document.objects.filter(source="pydoc:with").order_by("created_at").first()
    assert chunk.metadata["topic"] == "with"
    assert chunk.metadata["title"] == 'The "with" statement'
    assert chunk.context == 'The "with" statement'  # the title: embedded, not shown
    assert not chunk.content.startswith('The "with" statement\n\n')


def test_operator_edits_are_kept_and_force_restores_the_shipped_demo() -> None:
    topics = few("pass")
    load_demo(topics=topics)
    chain = AdvisorChain.objects.get(slug=loader.MAIN_CHAIN)
    chain.system_prompt = "Answer in French."
    chain.save()
    words = SensitiveWordList.objects.get(slug=loader.WORD_LIST)
    words.words = ["only-mine"]
    words.save()

    assert load_demo(topics=topics).reset == []
    assert AdvisorChain.objects.get(slug=loader.MAIN_CHAIN).system_prompt == "Answer in French."

    report = load_demo(topics=topics, force=True)
    assert len(report.reset) == 9 and report.embedded == report.chunks > 0
    assert AdvisorChain.objects.get(slug=loader.MAIN_CHAIN).system_prompt == loader.SYSTEM_PROMPT
    assert SensitiveWordList.objects.get(slug=loader.WORD_LIST).words == loader.SENSITIVE_WORDS
    assert AdvisorChain.objects.get(slug=loader.MAIN_CHAIN).advisors.count() == 6


def test_a_changed_corpus_is_rebuilt_and_vanished_topics_removed() -> None:
    load_demo(topics=few("pass", "del"))
    report = load_demo(topics=few("pass", "break"))
    assert not report.collection_up_to_date and report.removed > 0
    assert set(Document.objects.values_list("source", flat=True)) == {"pydoc:pass", "pydoc:break"}


def test_the_demo_chains_are_clean_and_ordered_as_documented() -> None:
    load_demo(topics=few("pass"))
    for slug in (loader.MAIN_CHAIN, loader.JSON_CHAIN):
        chain = AdvisorChain.objects.get(slug=slug)
        assert check_draft(chain).messages == ()
        # Published: production serves exactly the loaded rows.
        assert chain.labels.get(name="production").version.snapshot_hash == (
            check_draft(chain).snapshot_hash
        )
    names = [a.name for a in load_chain(loader.MAIN_CHAIN).advisors]
    assert names == [
        "SafeGuardAdvisor",
        "GuardAdvisor",
        "SessionTurnAdvisor",
        "RetrievalAugmentationAdvisor",
        "Tool Calling Advisor",
        "SessionMemoryAdvisor",
        "SimpleLoggerAdvisor",
    ]
    orders = [a.order for a in load_chain(loader.MAIN_CHAIN).advisors]
    assert orders == sorted(orders)
    json_names = [a.name for a in load_chain(loader.JSON_CHAIN).advisors]
    assert json_names[-1] == "Structured Output Validation Advisor"


def test_the_full_demo_loads_once_then_only_checks(demo_snapshot, demo: Collection) -> None:
    first = demo_snapshot.report
    assert first.topics == len(python_reference_topics()) > 70
    assert first.embedded == first.chunks == len(demo_snapshot.documents) > 400
    out = io.StringIO()
    call_command("load_demo", stdout=out, stderr=io.StringIO())
    assert "(up to date)" in out.getvalue()
    assert demo.documents.count() == first.chunks
