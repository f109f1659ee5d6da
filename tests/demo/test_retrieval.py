"""The retrieval check: the demo chain's own retriever, hit@k, and the questions file."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from advisors_app.core.vectorstore import Eq
from advisors_app.definition import move_label, publish
from advisors_app.definition.runtime import load_chain
from advisors_app.demo.corpus import python_reference_topics
from advisors_app.demo.retrieval import (
    QUESTIONS_FILE,
    Question,
    chain_retriever,
    evaluate,
    load_questions,
)
from advisors_app.models import PRODUCTION, AdvisorChain, AdvisorConfig, Collection

pytestmark = pytest.mark.django_db


def promote_draft(slug: str) -> None:
    """Publish the chain's edited rows and point production at them."""
    chain = AdvisorChain.objects.get(slug=slug)
    version, _ = publish(chain)
    move_label(chain, PRODUCTION, version)


def check(*args: str) -> str:
    out = io.StringIO()
    call_command("retrieval_check", *args, stdout=out)
    return out.getvalue()


def test_the_questions_file_has_30_or_more_questions_on_known_topics() -> None:
    questions = load_questions()
    assert len(questions) >= 30
    assert len({q.question for q in questions}) == len(questions)
    known = {topic.name for topic in python_reference_topics()}
    assert {q.topic for q in questions} <= known


def test_prints_hit_at_1_top_k_and_5_on_a_subset(demo: Collection) -> None:
    output = check("--limit", "4", "-v", "2")
    assert output.startswith(
        "Chain python-docs (RetrievalAugmentationAdvisor, top_k 3, similarity >= 0.25): "
        "4 questions in "
    )
    assert "hit@1 " in output and "hit@3 " in output and "hit@5 " in output
    result = json.loads(check("--limit", "4", "--json"))
    assert result["questions"] == 4 and result["top_k"] == 3
    assert 0.0 <= result["hit@1"] <= result["hit@3"] <= result["hit@5"] <= 1.0


@pytest.mark.django_db(transaction=True)
async def test_the_with_question_finds_the_with_topic_first(demo: Collection) -> None:
    from asgiref.sync import sync_to_async

    compiled = await sync_to_async(load_chain)("python-docs")
    retriever = chain_retriever(compiled.advisors)
    assert (retriever.top_k, retriever.similarity_threshold) == (3, 0.25)
    report = await evaluate(
        retriever,
        [Question("How does the with statement work?", "with"), Question("pass?", "nope")],
        ks=(1, 5),
    )
    assert report.retrieved[0][0] == "with"
    assert report.hits(1) == 1 and report.rate(5) == 0.5
    assert [q.topic for q, _ in report.misses(5)] == ["nope"]


def test_the_chain_filter_applies(demo: Collection, tmp_path: Path) -> None:
    row = AdvisorConfig.objects.get(
        chain__slug="python-docs", advisor_type="retrieval_augmentation"
    )
    row.params = {**row.params, "filter_expression": "topic == 'async'"}
    row.save()
    promote_draft("python-docs")
    retriever = chain_retriever(load_chain("python-docs").advisors)
    assert retriever.filter_expression == Eq("topic", "async")
    questions = tmp_path / "questions.json"
    questions.write_text(
        json.dumps(
            {"questions": [{"question": "How does the with statement work?", "topic": "with"}]}
        )
    )
    assert json.loads(check("--questions", str(questions), "--json"))["hit@5"] == 0.0


def test_errors_name_the_problem(demo: Collection, tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="no enabled chain 'nope'"):
        check("--chain", "nope")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"questions": [{"question": "no topic"}]}))
    with pytest.raises(CommandError, match="entry 0 needs a 'question' and a 'topic'"):
        check("--questions", str(bad))
    AdvisorConfig.objects.filter(advisor_type="retrieval_augmentation").delete()
    promote_draft("python-docs")
    with pytest.raises(CommandError, match="no retrieval advisor"):
        check()
    assert AdvisorChain.objects.filter(slug="python-docs").exists()
    assert QUESTIONS_FILE.is_file()
