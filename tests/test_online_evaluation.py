"""Online evaluation (issue 39): live turns of a chain's label sampled by a rule, scored on the
task queue with the registry's evaluators (``source = "online"``), never touching the turn; the
judge's spend charged to the rule's budget until it is used up."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.test import override_settings
from django_tasks_db.models import DBTaskResult

from advisors_app.costs.budgets import clear_budget_cache
from advisors_app.costs.pricing import clear_price_cache
from advisors_app.evaluation.evaluators import BaseEvaluator, evaluator_registry, object_schema
from advisors_app.models import CallLog, ChatMessage, ModelPrice, OnlineEvaluation, Score
from advisors_app.online import sampling
from advisors_app.online.aggregates import rolling_means
from tests.api.conftest import client_for
from tests.api.views.test_budget_transports import turn_frames
from tests.api.views.test_chat import parse_sse, read_stream
from tests.factories import make_chain, scripted_model
from tests.task_worker import DbWorker, run_queued_tasks

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("fresh_chain_cache"),
]

NO_THROTTLE = override_settings(ADVISORS={"CHAT_THROTTLE_RATE": ""})
CONTAINS = {"key": "contains", "params": {"strings": ["refund"]}}


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    for clear in (clear_price_cache, clear_budget_cache, sampling.clear_rules):
        clear()
    yield
    for clear in (clear_price_cache, clear_budget_cache, sampling.clear_rules):
        clear()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def seeded(monkeypatch: pytest.MonkeyPatch) -> random.Random:
    generator = random.Random(39)
    monkeypatch.setattr(sampling, "random", generator)
    return generator


@pytest.fixture
def chain() -> Any:
    return make_chain("support", model=scripted_model("support-model", ("A refund takes 5 days.",)))


def ask(user: Any, slug: str = "support") -> dict[str, Any]:
    response = client_for(user).post(f"/api/chains/{slug}/call/", {"message": "hi"}, format="json")
    assert response.status_code == 200, response.content
    return dict(response.json())


def ask_stream(user: Any) -> list[tuple[str, dict[str, Any]]]:
    response = client_for(user).post(
        "/api/chains/support/stream/", {"message": "hi"}, format="json"
    )
    assert response.status_code == 200
    return parse_sse(read_stream(response))


def queued() -> int:
    return DBTaskResult.objects.filter(task_path__endswith="evaluate_turn").count()


@NO_THROTTLE
@pytest.mark.parametrize("rate", [0.0, 0.5, 1.0])
def test_sampling_draws_each_turn_against_the_rate(
    chain: Any, user: Any, seeded: random.Random, rate: float
) -> None:
    OnlineEvaluation.objects.create(chain=chain, sample_rate=rate, evaluators=[CONTAINS])
    replay = random.Random(39)
    expected = sum(replay.random() < rate for _ in range(20))
    for _ in range(20):
        ask(user)
    assert queued() == expected
    assert expected == {0.0: 0, 1.0: 20}.get(rate, expected)
    assert 0 < expected < 20 or rate != 0.5


@NO_THROTTLE
def test_a_sampled_turn_is_scored_online_in_call_and_stream(chain: Any, user: Any) -> None:
    OnlineEvaluation.objects.create(
        chain=chain,
        sample_rate=1.0,
        evaluators=[CONTAINS, {"key": "latency_under", "params": {"threshold_ms": 60_000}}],
    )
    body = ask(user)
    events = ask_stream(user)
    assert events[-1][0] == "done"
    assert queued() == 2
    assert run_queued_tasks() == 2
    logs = list(CallLog.objects.order_by("pk"))
    assert [log.mode for log in logs] == ["call", "stream"]
    for log in logs:
        scores = {s.key: s for s in Score.objects.filter(call_log=log)}
        assert set(scores) == {"contains", "latency_under"}
        for score in scores.values():
            assert score.source == "online" and score.value is True
            assert score.chain_version_id == log.chain_version_id
            assert score.chain_slug == "support"
            assert score.message is not None and score.message.text == "A refund takes 5 days."
    assert body["content"] == "A refund takes 5 days."


@NO_THROTTLE
def test_rules_of_another_label_arm_or_outcome_do_not_sample(chain: Any, user: Any) -> None:
    OnlineEvaluation.objects.create(
        chain=chain, label="staging", sample_rate=1, evaluators=[CONTAINS]
    )
    OnlineEvaluation.objects.create(
        chain=chain, arm="candidate", sample_rate=1, evaluators=[CONTAINS]
    )
    OnlineEvaluation.objects.create(
        chain=chain, sample_rate=1, evaluators=[CONTAINS], filters={"outcome": ["error"]}
    )
    OnlineEvaluation.objects.create(
        chain=chain, sample_rate=1, evaluators=[CONTAINS], filters={"groups": ["reviewers"]}
    )
    OnlineEvaluation.objects.create(
        chain=chain, sample_rate=1, evaluators=[CONTAINS], enabled=False
    )
    ask(user)
    assert queued() == 0


class Broken(BaseEvaluator):
    async def evaluate(self, case: Any) -> Any:
        raise RuntimeError("evaluator bug")


@pytest.fixture
def broken() -> Iterator[None]:
    evaluator_registry.register(
        "online_broken", params_schema=object_schema({}), factory=lambda spec: Broken(spec.key)
    )
    yield
    evaluator_registry.unregister("online_broken")


@NO_THROTTLE
def test_a_failing_evaluator_writes_nothing_and_leaves_the_rest(
    chain: Any, user: Any, broken: None
) -> None:
    OnlineEvaluation.objects.create(
        chain=chain, sample_rate=1, evaluators=[{"key": "online_broken"}, CONTAINS]
    )
    body = ask(user)
    assert body["content"] == "A refund takes 5 days."
    run_queued_tasks()
    assert list(Score.objects.values_list("key", "source")) == [("contains", "online")]
    log = CallLog.objects.get()
    assert log.status == "ok"
    assert ChatMessage.objects.filter(text="A refund takes 5 days.").count() == 1


def test_a_hook_that_raises_never_reaches_the_turn(
    chain: Any, user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    OnlineEvaluation.objects.create(
        chain=chain, sample_rate=1, evaluators=[CONTAINS], filters={"params": {"lang": "en"}}
    )

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("sampling bug")

    monkeypatch.setattr(sampling, "matches", boom)
    with NO_THROTTLE:
        assert ask(user)["content"] == "A refund takes 5 days."
    assert queued() == 0


def priced_judge(per_million: int) -> Any:
    model = scripted_model("judge", responses=('{"score": 5, "reason": "Correct."}',))
    model.pricing = "manual"
    model.save()
    ModelPrice.objects.create(
        chat_model=model,
        input_per_million=Decimal(per_million),
        output_per_million=Decimal(2 * per_million),
    )
    return model


@NO_THROTTLE
def test_the_judge_is_charged_to_the_rule_until_its_budget_is_used_up(
    chain: Any, user: Any
) -> None:
    judge = priced_judge(per_million=1_000_000)  # a dollar a token: one verdict uses it up
    rule = OnlineEvaluation.objects.create(
        chain=chain,
        sample_rate=1,
        evaluators=[{"key": "llm_judge", "params": {"rubric": "Is it right?"}}, CONTAINS],
        judge_model=judge,
        budget_usd=Decimal("1"),
    )
    ask(user)
    run_queued_tasks()
    rule.refresh_from_db()
    assert rule.spent_usd >= rule.budget_usd
    assert rule.stopped_reason == "budget used up"
    first = CallLog.objects.get()
    assert [r["model_config"] for r in first.cost_rounds if r.get("purpose") == "judge"] == [
        "judge"
    ]
    assert set(Score.objects.values_list("key", flat=True)) == {"llm_judge", "contains"}
    spent = rule.spent_usd

    ask(user)
    run_queued_tasks()
    second = CallLog.objects.exclude(pk=first.pk).get()
    assert not [r for r in second.cost_rounds if r.get("purpose") == "judge"]
    assert list(Score.objects.filter(call_log=second).values_list("key", flat=True)) == ["contains"]
    rule.refresh_from_db()
    assert rule.spent_usd == spent and rule.stopped_reason == "budget used up"


@NO_THROTTLE
async def test_a_websocket_turn_is_sampled_and_scored(chain: Any, user: Any) -> None:
    await OnlineEvaluation.objects.acreate(chain=chain, sample_rate=1.0, evaluators=[CONTAINS])
    frames = await turn_frames(user, {"type": "message", "message": "hi"})
    assert frames[-1]["type"] == "done"
    assert await sync_to_async(run_queued_tasks)() == 1
    score = await Score.objects.select_related("call_log").aget()
    assert (score.key, score.source, score.value) == ("contains", "online", True)
    assert score.call_log is not None and score.call_log.trace_id == frames[-1]["trace_id"]


@NO_THROTTLE
def test_a_failing_judge_leaves_the_turn_and_the_other_scores(chain: Any, user: Any) -> None:
    judge = scripted_model("broken-judge", responses=({"error": "judge down"},))
    OnlineEvaluation.objects.create(
        chain=chain,
        sample_rate=1,
        evaluators=[{"key": "llm_judge", "params": {"rubric": "Right?"}}, CONTAINS],
        judge_model=judge,
    )
    assert ask(user)["content"] == "A refund takes 5 days."
    run_queued_tasks()
    scores = {s.key: s for s in Score.objects.all()}
    assert scores["contains"].value is True
    # No verdict: stored as the registry's "invalid" (no number made up), with why.
    assert scores["llm_judge"].value == "invalid"
    assert "judge" in scores["llm_judge"].comment
    assert CallLog.objects.get().status == "ok"


@NO_THROTTLE
def test_rolling_means_per_version_and_key(chain: Any, user: Any, admin_client: Any) -> None:
    rule = OnlineEvaluation.objects.create(
        chain=chain,
        sample_rate=1,
        evaluators=[CONTAINS, {"key": "contains", "params": {"strings": ["nope"], "key": "nope"}}],
    )
    for _ in range(3):
        ask(user)
    run_queued_tasks()
    assert rolling_means("support", last=2) == [
        {"version": 1, "arm": "", "key": "contains", "n": 2, "mean": 1.0},
        {"version": 1, "arm": "", "key": "nope", "n": 2, "mean": 0.0},
    ]
    page = admin_client.get(f"/admin/advisors_app/onlineevaluation/{rule.pk}/change/")
    assert "contains: mean 1.0 over 3" in page.content.decode()


@NO_THROTTLE
def test_the_real_worker_scores_sampled_turns(chain: Any, user: Any, tmp_path: Path) -> None:
    OnlineEvaluation.objects.create(chain=chain, sample_rate=1, evaluators=[CONTAINS])
    with DbWorker(tmp_path / "worker.log") as worker:
        worker.wait_ready()
        ask(user)
        ask_stream(user)
        deadline = time.monotonic() + 60  # a safety net, not a timing
        while DBTaskResult.objects.exclude(status__in=["SUCCESSFUL", "FAILED"]).exists():
            assert worker.process is not None and worker.process.poll() is None, worker.log()
            assert time.monotonic() < deadline, worker.log()
            time.sleep(0.05)
    assert set(DBTaskResult.objects.values_list("status", flat=True)) == {"SUCCESSFUL"}
    assert sorted(Score.objects.values_list("call_log__mode", "source")) == [
        ("call", "online"),
        ("stream", "online"),
    ]


@NO_THROTTLE
def test_a_judge_priced_in_another_currency_stops_a_budgeted_rule(chain: Any, user: Any) -> None:
    judge = priced_judge(per_million=1)
    ModelPrice.objects.filter(chat_model=judge).update(currency="EUR")
    rule = OnlineEvaluation.objects.create(
        chain=chain,
        sample_rate=1,
        evaluators=[{"key": "llm_judge", "params": {"rubric": "Right?"}}, CONTAINS],
        judge_model=judge,
        budget_usd=Decimal("10"),
    )
    ask(user)
    run_queued_tasks()
    rule.refresh_from_db()
    assert rule.stopped_reason == "judge cost not countable in USD (priced in EUR)"
    assert rule.spent_usd == 0
    ask(user)
    run_queued_tasks()
    second = CallLog.objects.order_by("pk").last()
    assert list(Score.objects.filter(call_log=second).values_list("key", flat=True)) == ["contains"]
