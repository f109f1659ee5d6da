"""The demo's 54 retrieval questions ship as an evaluation dataset (issue 22)."""

from __future__ import annotations

import pytest

from advisors_app.demo.dataset import DATASET, ensure_demo_dataset
from advisors_app.demo.retrieval import load_questions
from advisors_app.models import Dataset

pytestmark = pytest.mark.django_db


def test_the_demo_dataset_holds_every_question_expecting_its_topic() -> None:
    first = ensure_demo_dataset()
    questions = load_questions()
    assert len(first.created) == len(questions) == 54
    items = list(Dataset.objects.get(slug=DATASET).current_items())
    by_message = {item.message: item for item in items}
    for question in questions:
        item = by_message[question.question]
        assert item.expected == {"documents": {"topic": [question.topic]}}
        assert item.key.split("-")[0] == question.topic.split("-")[0]
    again = ensure_demo_dataset()  # loading the demo again changes nothing
    assert (again.created, again.changed, len(again.unchanged)) == ([], [], 54)
