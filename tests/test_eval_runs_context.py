"""What a run reads from the turn besides the answer (issue 22): the retrieved documents with
their metadata in rank order (``retrieval_hit_at_k``, ``mrr``) and the tool calls
(``tool_call_match``)."""

from __future__ import annotations

from typing import Any

import pytest

from advisors_app.definition.runtime import clear_cache
from advisors_app.evaluation.datasets import import_items, parse_items
from advisors_app.evaluation.runs import create_run, execute_run
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.models import ChatModelConfig, Collection, Dataset
from tests.factories import make_chain, scripted_model

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_chains() -> Any:
    clear_cache()
    yield
    clear_cache()


def dataset(items: list[dict[str, Any]]) -> Dataset:
    row = Dataset.objects.create(slug="ctx")
    import_items(row, parse_items(items))
    return row


def test_retrieved_documents_are_judged_by_their_metadata() -> None:
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "refunds.md", "Refunds take 5 days.", metadata={"topic": "refunds"})
    ingest_text(
        collection, "parcels.md", "Parcels arrive within a week.", metadata={"topic": "shipping"}
    )
    make_chain(
        "rag",
        model=scripted_model("rag-model", responses=("ok",)),
        advisors=(("question_answer", {"collection": "kb", "top_k": 1}),),
    )
    data = dataset(
        [
            {
                "key": "refund",
                "input": {"message": "How long do refunds take?"},
                "expected": {"documents": {"topic": ["refunds"]}},
            },
            {
                "key": "wrong",
                "input": {"message": "How long do refunds take?"},
                "expected": {"documents": {"topic": ["shipping"]}},
            },
        ]
    )
    run = create_run(data, "rag")
    assert [e["key"] for e in run.evaluators] == ["retrieval_hit_at_k", "mrr"]
    run = execute_run(run.pk)
    assert run is not None and run.status == "done"
    results = {r.item_key: r for r in run.results.all()}
    [document] = results["refund"].documents
    assert document["metadata"]["topic"] == "refunds" and document["id"]
    assert "Refunds take 5 days." in document["text"]
    assert results["refund"].scores["retrieval_hit_at_k"]["passed"] is True
    assert results["refund"].scores["mrr"]["value"] == 1.0
    assert results["wrong"].scores["retrieval_hit_at_k"]["passed"] is False
    assert run.summary["evaluators"]["mrr"]["mean"] == 0.5


def test_tool_calls_are_judged() -> None:
    model = ChatModelConfig.objects.create(
        slug="tool-model",
        provider="scripted",
        settings={
            "responses": ["No tool."],
            "repeat": True,
            "tool_rules": [
                {"when": "compute", "tool": "calculator", "arguments": {"expression": "6 * 7"}}
            ],
            "after_tool": "It is {tool_result}.",
        },
    )
    make_chain(
        "tools",
        model=model,
        advisors=(("tool_calling", {}),),
        tools=["calculator"],
    )
    data = dataset(
        [
            {
                "key": "calc",
                "input": {"message": "Please compute six times seven"},
                "expected": {
                    "tool_calls": [{"name": "calculator", "arguments": {"expression": "6 * 7"}}]
                },
            },
            {
                "key": "none",
                "input": {"message": "Hello"},
                "expected": {"tool_calls": [{"name": "calculator"}]},
            },
        ]
    )
    run = execute_run(create_run(data, "tools").pk)
    assert run is not None and run.status == "done", run and run.error
    results = {r.item_key: r for r in run.results.all()}
    assert results["calc"].output == "It is 42."
    assert [c["name"] for c in results["calc"].tool_calls] == ["calculator"]
    assert results["calc"].scores["tool_call_match"]["passed"] is True
    assert results["none"].scores["tool_call_match"]["passed"] is False


def test_a_tool_needing_approval_is_recorded_not_run() -> None:
    from advisors_app.demo.loader import NOTES_MODEL_SETTINGS
    from advisors_app.demo.models import DemoNote
    from advisors_app.models import ToolApproval

    model = ChatModelConfig.objects.create(
        slug="notes-model", provider="scripted", settings=NOTES_MODEL_SETTINGS
    )
    make_chain(
        "notes",
        model=model,
        advisors=(("message_chat_memory", {"max_messages": 10}), ("tool_calling", {})),
        tools=["save_note", "list_notes"],
    )
    data = dataset(
        [
            {
                "key": "save",
                "input": {"message": "Save a note: buy milk"},
                "expected": {"tool_calls": [{"name": "save_note"}]},
            }
        ]
    )
    run = execute_run(create_run(data, "notes").pk)
    assert run is not None and run.status == "done", run and run.error
    result = run.results.get()
    assert result.tool_calls == [
        {"name": "save_note", "arguments": result.tool_calls[0]["arguments"], "skipped": True}
    ]
    assert "buy milk" in str(result.tool_calls[0]["arguments"])
    assert result.scores["tool_call_match"]["passed"] is True
    assert not DemoNote.objects.exists()  # the side effect did not happen
    assert not ToolApproval.objects.exists()  # gone with the throwaway conversation
