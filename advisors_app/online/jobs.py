"""The task of online evaluation: a rule's evaluators on one stored turn.

:data:`evaluate_turn` reads the turn as stored — the reply (its sources, tool calls and
timings in its metadata), the user's message, the call log (latency, cost, version, arm) —
builds the rule's evaluators with the evaluator registry as an evaluation run does, runs them
and writes one :class:`~advisors_app.models.Score` per evaluator with ``source = "online"``.
An evaluator that raises writes nothing and is logged; the others still score.

``llm_judge`` evaluators ask the rule's ``judge_model`` (unless their params name a model);
their calls are metered as an evaluation run's are (:class:`~advisors_app.costs.side_calls.
SideCalls`, purpose ``"judge"``, added to the turn's call log) and their cost is added to the
rule's ``spent_usd``. Once that reaches ``budget_usd`` judging stops: the rule's
``stopped_reason`` says ``"budget used up"`` (shown in the admin) and judges are skipped,
while the other evaluators go on. A judge whose spend the budget cannot count (a model without
a price, or priced in another currency) stops a rule with a budget the same way, saying why;
saving the rule in the admin lets judging go on.
"""

from __future__ import annotations

import logging
from decimal import Decimal, InvalidOperation
from typing import Any

from asgiref.sync import async_to_sync
from django.db.models import F

from advisors_app.costs.side_calls import SideCalls
from advisors_app.evaluation.curation import user_message_of
from advisors_app.evaluation.evaluators import EvalCase, evaluator_registry
from advisors_app.evaluation.runs import _score_value
from advisors_app.models import CallLog, ChatMessage, OnlineEvaluation, Score

try:
    from django.tasks import task  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

__all__ = ["BUDGET_USED_UP", "JUDGE", "evaluate", "evaluate_turn"]

logger = logging.getLogger(__name__)

#: The registry key of the evaluator whose calls are charged to the rule's budget.
JUDGE = "llm_judge"
BUDGET_USED_UP = "budget used up"


@task()
def evaluate_turn(rule_id: int, call_log_id: int, message_id: int) -> int:
    """The task: :func:`evaluate`; how many scores it wrote (0 when a row is gone)."""
    rule = OnlineEvaluation.objects.select_related("judge_model").filter(pk=rule_id).first()
    call_log = CallLog.objects.filter(pk=call_log_id).first()
    reply = ChatMessage.objects.filter(pk=message_id).first()
    if rule is None or call_log is None or reply is None:
        return 0
    return evaluate(rule, call_log, reply)


def _case(call_log: CallLog, reply: ChatMessage, meter: Any) -> EvalCase:
    meta = reply.metadata or {}
    asked = user_message_of(reply)
    tools = [
        {"name": t.get("name"), "arguments": t.get("arguments")} for t in meta.get("tools", [])
    ]
    return EvalCase(
        input={"message": asked.text if asked is not None else ""},
        expected={},
        output=reply.text,
        documents=list(meta.get("sources") or []),
        tool_calls=tools,
        latency_ms=call_log.latency * 1000 if call_log.latency is not None else None,
        cost=call_log.total_cost,
        meter=meter,
    )


def _evaluators(rule: OnlineEvaluation) -> list[tuple[str, Any]]:
    """``(registry key, evaluator)`` for each entry that still builds (one that does not is
    logged and left out: the registry may have changed since the rule was saved)."""
    built = []
    for entry in rule.evaluators:
        key, params = entry.get("key"), dict(entry.get("params") or {})
        if key == JUDGE and rule.judge_model is not None:
            params.setdefault("model", rule.judge_model.slug)
        try:
            built.append((key, evaluator_registry.build(key, params)))
        except (ValueError, TypeError):
            logger.exception("Online evaluation %s: evaluator %r does not build", rule.pk, key)
    return built


def evaluate(rule: OnlineEvaluation, call_log: CallLog, reply: ChatMessage) -> int:
    """Blocking: run ``rule``'s evaluators on the stored turn and write their scores."""
    calls = SideCalls(call_log.user, call_log.chain_id, purpose="judge", trace_id=call_log.trace_id)
    case = _case(call_log, reply, calls.meter)
    evaluators = _evaluators(rule)
    stopped = rule.budget_used_up or (rule.budget_usd is not None and rule.stopped_reason)
    if stopped and any(key == JUDGE for key, _ in evaluators):
        _stop(rule, rule.stopped_reason or BUDGET_USED_UP)
        evaluators = [(key, evaluator) for key, evaluator in evaluators if key != JUDGE]
    results: list[tuple[str, Any]] = []

    async def run_all() -> None:
        for type_key, evaluator in evaluators:
            try:
                results.append((evaluator.key, await evaluator.evaluate(case)))
            except Exception:  # one broken evaluator costs its own score only
                logger.exception("Online evaluation %s: evaluator %r failed", rule.pk, type_key)

    try:
        async_to_sync(run_all)()
    finally:
        calls.close()
        _charge(rule, calls)
    rows = []
    for key, score in results:
        columns = _score_value(score.value)
        if columns is None:
            continue
        rows.append(
            Score(
                key=key[:64],
                comment=str(score.comment or "")[:2000],
                source=Score.Source.ONLINE,
                message=reply,
                call_log=call_log,
                chain_version_id=call_log.chain_version_id,
                chain_slug=call_log.chain_slug,
                **columns,
            )
        )
    Score.objects.bulk_create(rows)
    return len(rows)


def _charge(rule: OnlineEvaluation, calls: SideCalls) -> None:
    """Add what the judge spent to the rule (one ``UPDATE``, safe with other workers); stop
    judging once the budget is used up."""
    if not calls.meter.rounds:
        return
    summary = calls.meter.summary()
    try:
        spent = Decimal(str(summary["total_cost"]))
    except (KeyError, InvalidOperation, ValueError):
        spent = None
    currency = summary.get("currency") or "USD"
    if spent is None or currency != "USD":
        # A spend the budget cannot count (no price, or another currency): a rule with a
        # budget stops judging rather than spend without a limit.
        if rule.budget_usd is not None:
            why = "no price" if spent is None else f"priced in {currency}"
            _stop(rule, f"judge cost not countable in USD ({why})")
        return
    OnlineEvaluation.objects.filter(pk=rule.pk).update(spent_usd=F("spent_usd") + spent)
    rule.refresh_from_db(fields=["spent_usd", "budget_usd"])
    if rule.budget_used_up:
        _stop(rule)


def _stop(rule: OnlineEvaluation, reason: str = BUDGET_USED_UP) -> None:
    if rule.stopped_reason != reason:
        rule.stopped_reason = reason
        OnlineEvaluation.objects.filter(pk=rule.pk).update(stopped_reason=reason)
        logger.warning("Online evaluation %s: judging stopped: %s", rule.pk, reason)
