"""Rows for evaluation tests: a chain with two versions that answer differently, and a
dataset whose items the versions pass and fail in known places."""

from __future__ import annotations

from typing import Any

from advisors_app.definition import move_label, publish
from advisors_app.evaluation.datasets import import_items, parse_items
from advisors_app.models import Dataset
from tests.factories import make_chain, scripted_model

__all__ = ["ITEMS", "make_dataset", "make_versions"]

#: Version 1 answers "Refunds take 5 days."; version 2 "Refunds take 10 days, by bank transfer."
ITEMS: list[dict[str, Any]] = [
    {
        "key": "days",
        "input": {"message": "How long do refunds take?"},
        "expected": {"output": "5 days"},
    },
    {
        "key": "bank",
        "input": {"message": "How are refunds paid?"},
        "expected": {"output": "bank transfer"},
    },
    {
        "key": "followup",
        "input": {
            "message": "And how long?",
            "history": [
                {"role": "user", "content": "I want a refund."},
                {"role": "assistant", "content": "Sure."},
            ],
        },
        "expected": {"output": "refunds take"},
    },
]


def make_versions() -> Any:
    """Chain ``support``: version 1 (production) and version 2 (staging), on scripted models."""
    chain = make_chain(
        model=scripted_model("v1-model", responses=("Refunds take 5 days.",)),
        advisors=(("message_chat_memory", {"max_messages": 10}),),
    )
    chain.chat_model = scripted_model(
        "v2-model", responses=("Refunds take 10 days, by bank transfer.",)
    )
    chain.save()
    version, _ = publish(chain, message="v2")
    move_label(chain, "staging", version)
    return chain


def make_dataset(slug: str = "refunds") -> Dataset:
    dataset = Dataset.objects.create(slug=slug)
    import_items(dataset, parse_items(ITEMS))
    return dataset
