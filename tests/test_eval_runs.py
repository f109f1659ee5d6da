"""Evaluation runs (issue 22, "Runs"): a chain version answers a dataset through the real turn
pipeline, synchronously (``manage.py eval_run``) or in a task worker, with the same summary."""

from __future__ import annotations

import json
import time
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.evaluation.datasets import import_items, parse_items
from advisors_app.evaluation.runs import (
    EVAL_USERNAME,
    EvalRunError,
    create_run,
    default_evaluators,
    execute_run,
    submit_run,
)
from advisors_app.models import CallLog, Conversation, EvalRun, Score
from tests.eval_fixtures import make_dataset, make_versions
from tests.task_worker import DbWorker, run_queued_tasks

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_chains() -> Any:
    clear_cache()
    yield
    clear_cache()


def eval_run(*args: str) -> str:
    out = StringIO()
    call_command("eval_run", *args, stdout=out)
    return out.getvalue()


def test_a_run_answers_every_item_through_the_turn_pipeline_and_stores_scores() -> None:
    make_versions()
    dataset = make_dataset()
    run = create_run(dataset, "support")  # production: version 1
    assert (run.status, run.total, run.version_number, run.label) == ("queued", 3, 1, "production")
    assert run.evaluators == [{"key": "contains", "params": {"ignore_case": True}}]
    run = execute_run(run.pk)
    assert run is not None and run.status == "done" and run.done == 3
    results = {r.item_key: r for r in run.results.all()}
    assert {k: r.scores["contains"]["passed"] for k, r in results.items()} == {
        "days": True,
        "bank": False,
        "followup": True,
    }
    assert run.summary["evaluators"]["contains"] == {
        "mean": pytest.approx(2 / 3, abs=1e-6),
        "pass_rate": pytest.approx(2 / 3, abs=1e-6),
        "scored": 3,
        "judged": 3,
        "passed": 2,
    }
    assert (run.summary["items"], run.summary["errors"]) == (3, 0)
    days = results["days"]
    assert days.output == "Refunds take 5 days." and days.latency_ms is not None
    assert days.call_log is not None and days.call_log.trace_id == days.trace_id
    assert days.call_log.chain_version_id == run.chain_version_id
    # One Score row per judgement, by the evaluator, on the turn's call log.
    scores = Score.objects.filter(source="evaluator")
    assert scores.count() == 3
    assert {s.call_log_id for s in scores} == {r.call_log_id for r in results.values()}
    assert all(s.chain_slug == "support" and s.message_id is None for s in scores)
    # The throwaway conversations are gone; the history item's turn saw its history.
    assert not Conversation.objects.filter(owner__username=EVAL_USERNAME).exists()
    followup = CallLog.objects.get(trace_id=results["followup"].trace_id)
    assert followup.status == "ok"
    # Run again: a second run leaves the first alone.
    again = execute_run(run.pk)
    assert again is None  # not queued any more


def test_the_history_of_an_item_reaches_the_model() -> None:
    make_versions()
    dataset = make_dataset()
    run = create_run(dataset, "support", evaluators=[{"key": "contains", "params": {}}])
    execute_run(run.pk)
    model = load_chain("support").client.chat_model  # the version 1 the run built
    texts = [[m.text for m in prompt.instructions] for prompt in model.prompts]
    assert ["I want a refund.", "Sure.", "And how long?"] in texts
    assert ["How long do refunds take?"] in texts


def test_what_a_run_cannot_do_is_refused_before_it_is_stored() -> None:
    make_versions()
    make_dataset()
    for kwargs, message in (
        ({"chain": "nope"}, "No enabled chain 'nope'"),
        ({"chain": "support", "label": "qa"}, "label 'qa'"),
        ({"chain": "support", "version": "x"}, 'give a number or "draft"'),
        ({"chain": "support", "evaluators": [{"key": "nope"}]}, "Unknown evaluator 'nope'"),
        (
            {"chain": "support", "evaluators": [{"key": "contains"}, {"key": "contains"}]},
            "one key",
        ),
    ):
        with pytest.raises(EvalRunError, match=message):
            create_run("refunds", **kwargs)
    with pytest.raises(EvalRunError, match="No dataset 'missing'"):
        create_run("missing", "support")
    assert not EvalRun.objects.exists()


def test_default_evaluators_follow_what_the_items_expect() -> None:
    from advisors_app.models import DatasetItem

    items = [
        DatasetItem(key="a", input={}, expected={"documents": {"topic": ["x"]}}),
        DatasetItem(key="b", input={}, expected={"tool_calls": [{"name": "t"}]}),
    ]
    assert [e["key"] for e in default_evaluators(items)] == [
        "retrieval_hit_at_k",
        "mrr",
        "tool_call_match",
    ]
    # A phrase to find: contains; a whole reference answer (a rated reply, a correction):
    # word overlap, which a worse answer lowers.
    phrase = DatasetItem(key="c", input={}, expected={"output": "14 days"})
    assert [e["key"] for e in default_evaluators([phrase])] == ["contains"]
    answer = "Refunds are paid back to the card you used, within fourteen days of the return."
    whole = DatasetItem(key="d", input={}, expected={"output": answer})
    assert [e["key"] for e in default_evaluators([phrase, whole])] == ["token_f1"]


def test_the_command_prints_the_summary_and_json(capsys: Any) -> None:
    make_versions()
    make_dataset()
    text = eval_run("refunds", "--chain", "support", "--label", "staging")
    assert "support v2 (staging) on refunds: 3 items, 0 errors." in text
    assert "contains: mean 0.667, pass rate 66.7% (2/3)" in text
    body = json.loads(
        eval_run(
            "refunds",
            "--chain",
            "support",
            "--version",
            "1",
            "--evaluator",
            'contains:{"strings": ["5 days"], "key": "five"}',
            "--json",
        )
    )
    assert body["version"] == 1 and body["status"] == "done"
    assert body["summary"]["evaluators"]["five"]["pass_rate"] == 1.0
    with pytest.raises(CommandError, match="not JSON"):
        eval_run("refunds", "--chain", "support", "--evaluator", "contains:{")
    with pytest.raises(CommandError, match="No enabled chain"):
        eval_run("refunds", "--chain", "other")


def test_a_run_of_the_draft() -> None:
    chain = make_versions()
    chain.chat_model.settings = {"responses": ["Refunds take 5 days by bank transfer."]}
    chain.chat_model.save()
    make_dataset()
    text = eval_run("refunds", "--chain", "support", "--version", "draft")
    assert "support draft on refunds" in text and "pass rate 100.0% (3/3)" in text


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(180)
def test_a_run_in_a_task_worker_gives_the_summary_the_command_gives(tmp_path: Path) -> None:
    make_versions()
    make_dataset()
    synchronous = json.loads(eval_run("refunds", "--chain", "support", "--json"))
    queued = submit_run("refunds", "support")
    assert queued.status == "queued" and queued.task_id
    with DbWorker(tmp_path / "worker.log") as worker:
        worker.wait_ready()
        deadline = time.monotonic() + 120
        while not (run := EvalRun.objects.get(pk=queued.pk)).finished:
            assert worker.process is not None and worker.process.poll() is None, worker.log()
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.1)
    assert run.status == "done", (run.error, worker.log())
    assert (run.done, run.total) == (3, 3)
    for part in ("items", "errors", "evaluators"):
        assert run.summary[part] == synchronous["summary"][part]
    assert Score.objects.filter(source="evaluator").count() == 6


def test_the_queued_task_runs_in_process_too() -> None:
    make_versions()
    make_dataset()
    run = submit_run("refunds", "support", label="staging")
    assert run_queued_tasks() == 1
    run.refresh_from_db()
    assert run.status == "done"
    assert run.summary["evaluators"]["contains"]["passed"] == 2  # bank, followup


# -- pinned options and repeats (issue 40, "A gate that does not flip") -------------------------


def _sent_options(chain: str = "support") -> list[tuple[Any, Any]]:
    """``(temperature, seed)`` of every prompt the chain's model was sent, in order."""
    model = load_chain(chain).client.chat_model
    return [(prompt.options.temperature, prompt.options.seed) for prompt in model.prompts]


def test_a_run_pins_temperature_0_and_a_seed_per_repeat_under_the_items_own_options() -> None:
    make_versions()
    dataset = make_dataset()
    run = create_run(dataset, "support", repeats=2)
    assert (run.chat_options, run.repeats, run.total) == ({"temperature": 0, "seed": 0}, 2, 6)
    run = execute_run(run.pk)
    assert run is not None and (run.done, run.total) == (6, 6)
    # Items by key (bank, days, followup), each twice: the seed is one higher on the repeat.
    assert _sent_options() == [(0, 0), (0, 1)] * 3
    results = list(run.results.values_list("item_key", "repeat"))
    assert results == [(key, r) for key in ("bank", "days", "followup") for r in (0, 1)]
    assert (run.summary["items"], run.summary["results"]) == (3, 6)
    assert run.summary["evaluators"]["contains"]["judged"] == 6
    # An item's own options win; {} pins nothing.
    import_items(
        dataset,
        parse_items(
            [{"key": "hot", "input": {"message": "Hi", "params": {"options": {"temperature": 1}}}}]
        ),
        prune=True,
    )
    clear_cache()
    execute_run(create_run(dataset, "support", chat_options={"seed": 7}).pk)
    assert _sent_options() == [(1, 7)]
    clear_cache()
    execute_run(create_run(dataset, "support", chat_options={}).pk)
    assert _sent_options() == [(1, None)]


def test_run_options_that_cannot_be_used_are_refused() -> None:
    make_versions()
    make_dataset()
    for kwargs, message in (
        ({"repeats": 0}, "repeats: give a whole number from 1 to 20"),
        ({"repeats": 21}, "repeats: give a whole number from 1 to 20"),
        ({"chat_options": {"temperature": 9}}, "chat options.temperature"),
        ({"chat_options": {"max_token": 9}}, "chat options"),
        ({"chat_options": {"seed": 2**63 - 1}, "repeats": 2}, "overflows"),
    ):
        with pytest.raises(EvalRunError, match=message):
            create_run("refunds", "support", **kwargs)
    assert not EvalRun.objects.exists()


def test_the_command_takes_repeats_and_chat_options() -> None:
    make_versions()
    make_dataset()
    text = eval_run("refunds", "--chain", "support", "--repeats", "2")
    assert "support v1 (production) on refunds: 3 items, 0 errors." in text
    assert "each item 2 times, chat options pinned: seed=0, temperature=0" in text
    assert "contains: mean 0.667, pass rate 66.7% (4/6)" in text
    body = json.loads(
        eval_run("refunds", "--chain", "support", "--chat-options", '{"seed": 3}', "--json")
    )
    assert (body["repeats"], body["chat_options"]) == (1, {"seed": 3})
    assert "chat options pinned: none" in eval_run(
        "refunds", "--chain", "support", "--chat-options", "{}"
    )
    with pytest.raises(CommandError, match="give a JSON object"):
        eval_run("refunds", "--chain", "support", "--chat-options", "[1]")
    with pytest.raises(CommandError, match="repeats"):
        eval_run("refunds", "--chain", "support", "--repeats", "0")


@pytest.mark.django_db(transaction=True)
def test_version_names_the_chain_version_not_djangos(capsys: Any) -> None:
    """``manage.py eval_run ... --version 2`` runs version 2: the command's ``--version``
    replaces Django's (which prints Django's version and exits), through the real argv path."""
    import django
    from django.core.management import ManagementUtility

    make_versions()
    make_dataset()
    argv = ["manage.py", "eval_run", "refunds", "--chain", "support", "--version", "2", "--json"]
    ManagementUtility(argv).execute()
    body = json.loads(capsys.readouterr().out)
    assert (body["version"], body["status"]) == (2, "done")
    argv[argv.index("--version")] = "--chain-version"  # the spelling manage.py chat shares
    ManagementUtility(argv).execute()
    assert json.loads(capsys.readouterr().out)["version"] == 2
    with pytest.raises(SystemExit):
        ManagementUtility(["manage.py", "eval_run", "--help"]).execute()
    help_text = capsys.readouterr().out
    assert "--chain-version N, --version N" in help_text and "A chain version" in help_text
    assert django.get_version() not in help_text
