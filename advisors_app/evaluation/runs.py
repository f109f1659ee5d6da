"""Evaluation runs: a chain version answers every item of a dataset, evaluators judge it
(issue 22, "Runs").

:func:`create_run` resolves what to run — a version number, a label (``production`` by
default) or the draft — to the version it is *now* and records it, with the dataset's items as
of a time (default: now) and the evaluators (``[{"key", "params"}]``, built once to check
them; default: :func:`default_evaluators` of what the items expect). :func:`submit_run` also
enqueues :data:`eval_run_task` (Django's tasks API, as ingestion jobs do) in the same
transaction; :func:`execute_run` runs a queued run to its end, in a worker or synchronously
(``manage.py eval_run``): both give the same results.

A run pins its ``chat_options`` on every item's turn — temperature 0 and a seed unless it is
given others, under the item's own ``params.options`` — and runs each item ``repeats`` times
(:mod:`advisors_app.evaluation.run_options`): one result per item and repeat.

Each item goes through the **real turn pipeline** (:func:`advisors_app.turn.call_turn`,
the version pinned by number, so a label moved meanwhile changes nothing) as the dedicated
user :data:`EVAL_USERNAME` (staff, so it may run any version or the draft; inactive, so nobody
signs in as it; its chat-rate history is cleared before each item, since a run is bounded by
its dataset, and a budget on that user applies as to anyone). Each item gets a throwaway
conversation: the item's ``history`` is stored into it first, the turn runs with the item's
``params``, and the conversation is deleted afterwards (its call log stays, with the trace).
**Side-effect tools are not run**: a tool needing approval pauses the turn, as for a user; the
call is recorded as asked for and the pending approval goes with the conversation. Tools
without approval run as they would for a user, so a chain under evaluation should only
enable those that are safe to call.

What a result keeps: the answer, the retrieved documents in rank order (each chunk's ``id``,
``metadata``, ``score`` and text from the turn's response metadata; for sources known only by
id, the ``Document`` row's metadata), the tool calls, latency (ms), usage, cost and call log.
Every evaluator's score becomes a :class:`~advisors_app.models.Score` row (``source``
``evaluator``, the call log, the chain version; its message is gone with the throwaway
conversation) and a compact copy on the result. A turn that failed is judged on its empty
answer (so a failing chain scores low) and counted in the summary's ``errors``. Progress is
written after every item; the summary (per score key: mean of the numeric and boolean values,
pass rate of the judged cases) when the run ends.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from decimal import Decimal, InvalidOperation
from types import SimpleNamespace
from typing import Any, Protocol

from asgiref.sync import async_to_sync, sync_to_async
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from advisors_app.core.advisors.question_answer import RETRIEVED_DOCUMENTS
from advisors_app.core.messages import AssistantMessage, Message, UserMessage
from advisors_app.core.rag.advisor import DOCUMENT_CONTEXT
from advisors_app.costs.side_calls import SideCalls
from advisors_app.definition.runtime import DRAFT, ChainNotFound, VersionNotFound, resolve_target
from advisors_app.evaluation.run_options import PINNED_OPTIONS, item_params, run_option_problems
from advisors_app.exceptions import Refusal
from advisors_app.memory.conversations import conversation_key, create_conversation
from advisors_app.models import (
    AdvisorChain,
    CallLog,
    Conversation,
    Dataset,
    DatasetItem,
    Document,
    EvalResult,
    EvalRun,
    Score,
    items_as_of,
)
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.turn import TurnOutcome, call_turn
from advisors_app.turn.choose import TRIES_VERSIONS
from advisors_app.turn.events import TurnError
from advisors_app.turn.throttling import ChatRateThrottle

try:
    from django.tasks import task  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # Django 5.2: the django-tasks backport
    from django_tasks import task

__all__ = [
    "DEFAULT_EVALUATORS",
    "EVAL_USERNAME",
    "EvalRunError",
    "create_run",
    "default_evaluators",
    "eval_run_task",
    "eval_user",
    "execute_run",
    "submit_run",
    "summarize",
]

logger = logging.getLogger("advisors_app.evaluation")

#: The user every run's turns are made as (created when first needed).
EVAL_USERNAME = "advisors-eval"
#: Characters of a retrieved chunk's text a result keeps.
DOCUMENT_TEXT_CHARS = 1000
#: For each part of ``expected``: the evaluators (``{"key", "params"}``) a run uses by default
#: when an item holds it. An expected output is looked for in the answer (case aside): a
#: model's answer seldom equals a reference word for word.
DEFAULT_EVALUATORS: dict[str, tuple[dict[str, Any], ...]] = {
    "output": ({"key": "contains", "params": {"ignore_case": True}},),
    "json": ({"key": "json_schema", "params": {}},),
    "documents": ({"key": "retrieval_hit_at_k", "params": {}}, {"key": "mrr", "params": {}}),
    "tool_calls": ({"key": "tool_call_match", "params": {}},),
}

#: An expected output longer than this many words is a whole reference answer (a rated reply,
#: a reviewer's correction) rather than a phrase to find: it is judged by word overlap
#: (``token_f1``), which a worse answer lowers, instead of ``contains``, which it never meets.
WHOLE_ANSWER_WORDS = 12
WHOLE_ANSWER_EVALUATORS: tuple[dict[str, Any], ...] = (
    {"key": "token_f1", "params": {"threshold": 0.5}},
)

Status = EvalRun.Status


class EvalRunError(Refusal, ValueError):
    """Raised when a run cannot be created: an unknown dataset, chain, label or version, or
    evaluators that cannot be built; the message names which and why (400 ``invalid``)."""


class _Registry(Protocol):
    keys: tuple[str, ...]

    def build(self, key: str, params: Mapping[str, Any] | None = None) -> Any: ...


def _registry() -> _Registry:
    from advisors_app.evaluation.evaluators import evaluator_registry

    return evaluator_registry  # type: ignore[return-value, unused-ignore]


def default_evaluators(
    items: Iterable[DatasetItem], registry: _Registry | None = None
) -> list[dict[str, Any]]:
    """The evaluators for what ``items`` expect (:data:`DEFAULT_EVALUATORS`), those registered."""
    registry = registry or _registry()
    items = list(items)
    present = {part for item in items for part in (item.expected or {})}
    defaults = dict(DEFAULT_EVALUATORS)
    if any(_is_whole_answer(item) for item in items):
        defaults["output"] = WHOLE_ANSWER_EVALUATORS
    return [
        {"key": entry["key"], "params": dict(entry["params"])}
        for part, entries in defaults.items()
        if part in present
        for entry in entries
        if entry["key"] in registry.keys
    ]


def _is_whole_answer(item: DatasetItem) -> bool:
    output = (item.expected or {}).get("output")
    return isinstance(output, str) and len(output.split()) > WHOLE_ANSWER_WORDS


def _build(config: Sequence[Mapping[str, Any]], registry: _Registry) -> list[Any]:
    built = []
    for index, entry in enumerate(config):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("key"), str):
            raise EvalRunError(f'evaluator {index}: expected {{"key": str, "params"?: {{}}}}')
        try:
            built.append(registry.build(entry["key"], entry.get("params") or {}))
        except ValueError as exc:
            raise EvalRunError(f"evaluator {index} ({entry['key']}): {exc}") from exc
    keys = [evaluator.key for evaluator in built]
    if len(set(keys)) != len(keys):
        raise EvalRunError(
            f"two evaluators store their scores under one key ({', '.join(keys)}): give one a "
            'params "key" of its own'
        )
    return built


def eval_user() -> Any:
    """The user runs are made as (:data:`EVAL_USERNAME`), created staff and inactive."""
    user_model = get_user_model()
    user, created = user_model._default_manager.get_or_create(
        **{user_model.USERNAME_FIELD: EVAL_USERNAME},
        defaults={"is_staff": True, "is_active": False},
    )
    if created:
        user.set_unusable_password()
        user.save(update_fields=["password"])
    # Inactive, it holds no permission: the run's version was allowed when the run was made.
    setattr(user, TRIES_VERSIONS, True)
    return user


def create_run(
    dataset: Dataset | str,
    chain: str,
    *,
    label: str | None = None,
    version: int | str | None = None,
    evaluators: Sequence[Mapping[str, Any]] | None = None,
    as_of: datetime | None = None,
    created_by: Any = None,
    registry: _Registry | None = None,
    repeats: int = 1,
    chat_options: Mapping[str, Any] | None = None,
) -> EvalRun:
    """Store a queued run (see the module docstring); :class:`EvalRunError` when it cannot
    run. ``version``: a number or ``"draft"``; without it, ``label`` (default production).
    ``chat_options``: pinned on every item (default :data:`PINNED_OPTIONS`; ``{}``: none);
    ``repeats``: times each item runs."""
    registry = registry or _registry()
    pinned = dict(PINNED_OPTIONS if chat_options is None else chat_options)
    problems = run_option_problems(pinned, repeats)
    if problems:
        raise EvalRunError(" ".join(problems))
    if isinstance(dataset, str):
        try:
            dataset = Dataset.objects.get(slug=dataset)
        except Dataset.DoesNotExist:
            raise EvalRunError(f"No dataset {dataset!r}.") from None
    as_of = as_of or timezone.now()
    if version is not None and version != DRAFT:
        try:
            version = int(version)
        except (TypeError, ValueError):
            raise EvalRunError(f'version {version!r}: give a number or "draft".') from None
    try:
        target = resolve_target(chain, label=label, version=version)
    except ChainNotFound:
        raise EvalRunError(f"No enabled chain {chain!r}.") from None
    except VersionNotFound as exc:
        raise EvalRunError(str(exc)) from None
    items = list(items_as_of(dataset, as_of))
    config = [dict(e) for e in evaluators] if evaluators is not None else None
    if config is None:
        config = default_evaluators(items, registry)
    _build(config, registry)
    user = created_by if getattr(created_by, "is_authenticated", False) else None
    return EvalRun.objects.create(
        dataset=dataset,
        as_of=as_of,
        chain_slug=chain,
        label=target.label if version is None else "",
        version_asked="" if version is None else str(version),
        chain_version_id=target.version_id,
        version_number=target.number,
        evaluators=config,
        chat_options=pinned,
        repeats=repeats,
        total=len(items) * repeats,
        created_by=user,
    )


def submit_run(*args: Any, **kwargs: Any) -> EvalRun:
    """:func:`create_run` and enqueue its task, in one transaction (a worker never finds one
    without the other)."""
    with transaction.atomic():
        run = create_run(*args, **kwargs)
        result = eval_run_task.enqueue(str(run.pk))
        EvalRun.objects.filter(pk=run.pk).update(task_id=str(result.id))
    run.refresh_from_db()
    return run


@task()
def eval_run_task(run_id: str) -> dict[str, Any]:
    """Run the queued evaluation run ``run_id`` (:func:`execute_run`); its summary."""
    run = execute_run(int(run_id))
    return {"status": run.status, "summary": run.summary} if run is not None else {}


def execute_run(run_id: int, registry: _Registry | None = None) -> EvalRun | None:
    """Run a queued run to its end (``done``, or ``failed`` with ``error``); ``None`` when it
    is not queued (already run, deleted). Blocking; call it from no event loop."""
    claimed = EvalRun.objects.filter(pk=run_id, status=Status.QUEUED).update(
        status=Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        return None
    run = EvalRun.objects.get(pk=run_id)
    try:
        evaluators = _build(run.evaluators, registry or _registry())
        items = list(items_as_of(run.dataset_id, run.as_of))
        EvalRun.objects.filter(pk=run.pk).update(total=len(items) * run.repeats, done=0)
        user = eval_user()
        run.results.all().delete()
        done = 0
        for item in items:
            for repeat in range(run.repeats):
                _evaluate_item(run, item, user, evaluators, repeat)
                done += 1
                EvalRun.objects.filter(pk=run.pk).update(done=done)
        summary = summarize(run.results.all())
    except BaseException as exc:
        logger.exception("Evaluation run %s failed", run.pk)
        EvalRun.objects.filter(pk=run.pk).update(
            status=Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        raise
    EvalRun.objects.filter(pk=run.pk).update(
        status=Status.DONE, summary=summary, finished_at=timezone.now()
    )
    run.refresh_from_db()
    return run


# -- one item ----------------------------------------------------------------------------------

_repository = DjangoChatMemoryRepository()


def _history(item_input: Mapping[str, Any]) -> list[Message]:
    messages: list[Message] = []
    for turn in item_input.get("history") or []:
        role, content = turn.get("role"), str(turn.get("content", ""))
        messages.append(UserMessage(content) if role == "user" else AssistantMessage(content))
    return messages


def _clear_rate(user: Any) -> None:
    throttle = ChatRateThrottle()
    key = throttle.get_cache_key(SimpleNamespace(user=user, META={}), None)  # type: ignore[arg-type]
    if key:
        throttle.cache.delete(key)


def _turn_params(run: EvalRun) -> dict[str, Any]:
    if run.version_asked == DRAFT:
        return {"version": DRAFT}
    if run.version_number is not None:
        return {"version": run.version_number}
    return {"label": run.label or None}


async def _run_turn(
    run: EvalRun, item: DatasetItem, user: Any, conversation: str | None, repeat: int
) -> tuple[TurnOutcome | None, str]:
    params = item_params(run.chat_options, item.input.get("params"), repeat)
    try:
        outcome = await call_turn(
            run.chain_slug, user, item.message, conversation, params, **_turn_params(run)
        )
    except TurnError as exc:
        return None, f"{exc.code}: {exc}"
    except Exception as exc:  # the chain failed: its outcome (call log) is on the exception
        return getattr(exc, "turn_outcome", None), f"{type(exc).__name__}: {exc}"
    return outcome, ""


def _documents(outcome: TurnOutcome | None) -> list[dict[str, Any]]:
    """The retrieved chunks in rank order (see the module docstring)."""
    if outcome is None:
        return []
    found: list[dict[str, Any]] = []
    for key in (RETRIEVED_DOCUMENTS, DOCUMENT_CONTEXT):
        for entry in outcome.metadata.get(key) or []:
            if isinstance(entry, Mapping):
                metadata = entry.get("metadata")
                found.append(
                    {
                        "id": entry.get("id"),
                        "metadata": dict(metadata) if isinstance(metadata, Mapping) else {},
                        "score": entry.get("score"),
                        "text": str(entry.get("text") or "")[:DOCUMENT_TEXT_CHARS],
                    }
                )
    if found or not outcome.sources:
        return found
    ids = [s.get("document_id") for s in outcome.sources if s.get("document_id")]
    rows = {row.pk: row for row in Document.objects.filter(pk__in=ids)}
    for source in outcome.sources:
        row = rows.get(source.get("document_id"))
        metadata = dict(row.metadata) if row is not None else {}
        found.append(
            {
                "id": source.get("document_id"),
                "metadata": metadata,
                "score": source.get("score"),
                "text": str(source.get("snippet") or ""),
            }
        )
    return found


def _tool_calls(outcome: TurnOutcome | None) -> list[dict[str, Any]]:
    if outcome is None:
        return []
    calls = [{"name": t.get("name"), "arguments": t.get("arguments")} for t in outcome.tools]
    for pending in outcome.pending_approvals:
        name = pending.get("name") or pending.get("tool")
        calls.append({"name": name, "arguments": pending.get("arguments"), "skipped": True})
    return calls


def _cost(outcome: TurnOutcome | None) -> Decimal | None:
    total = (outcome.cost or {}).get("total") if outcome is not None else None
    try:
        return Decimal(total) if total is not None else None
    except (InvalidOperation, TypeError):
        return None


def _score_value(value: Any) -> dict[str, Any] | None:
    """Score's columns for ``value``; ``None`` when it cannot be stored (a non-finite number)."""
    if isinstance(value, bool):
        return {"value_type": Score.ValueType.BOOLEAN, "numeric_value": float(value)}
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return None
        return {"value_type": Score.ValueType.NUMERIC, "numeric_value": float(value)}
    label = str(value)[:100] or "?"
    return {"value_type": Score.ValueType.CATEGORICAL, "string_value": label}


async def _judge(evaluators: Sequence[Any], case: Any) -> dict[str, dict[str, Any]]:
    scores: dict[str, dict[str, Any]] = {}
    for evaluator in evaluators:
        try:
            score = await evaluator.evaluate(case)
        except Exception as exc:  # one broken evaluator does not stop the run
            logger.exception("Evaluator %r failed", evaluator.key)
            scores[evaluator.key] = {
                "value": "error",
                "passed": None,
                "comment": f"{type(exc).__name__}: {exc}"[:2000],
            }
            continue
        value = score.value
        if isinstance(value, float) and not math.isfinite(value):
            value = "invalid"
        scores[evaluator.key] = {"value": value, "passed": score.passed, "comment": score.comment}
    return scores


def _evaluate_item(
    run: EvalRun, item: DatasetItem, user: Any, evaluators: Sequence[Any], repeat: int
) -> None:
    from advisors_app.evaluation.evaluators import EvalCase

    # Each item's turn runs in a conversation made here, out of the user's lists while it
    # lives (deleted after the item): a run is no chat of theirs.
    public = f"eval-{run.pk}-{uuid.uuid4().hex}"
    key, _, _, _ = create_conversation(
        user, public, title=item.message, chain_version_id=run.chain_version_id, listed=False
    )
    history = _history(item.input)
    if history:
        _repository.save_all(key, history)
    _clear_rate(user)

    async def turn_and_judge() -> tuple[TurnOutcome | None, str, Any, dict[str, Any]]:
        outcome, error = await _run_turn(run, item, user, public, repeat)
        documents = await _adocuments(outcome)
        # The judges' model calls: charged to the run's user, logged with the item's turn.
        trace_id = outcome.trace_id if outcome is not None else None
        chain_id = await _chain_id(run)
        calls = await sync_to_async(SideCalls)(user, chain_id, purpose="judge", trace_id=trace_id)
        case = EvalCase(
            input=item.input,
            expected=item.expected,
            output=outcome.content if outcome is not None else "",
            documents=documents,
            tool_calls=_tool_calls(outcome),
            latency_ms=(outcome.timings.get("latency_ms") if outcome is not None else None),
            cost=_cost(outcome),
            meter=calls.meter,
        )
        try:
            return outcome, error, case, await _judge(evaluators, case)
        finally:
            await sync_to_async(calls.close)()

    try:
        outcome, error, case, scores = async_to_sync(turn_and_judge)()
    finally:
        _discard(user, public)
    _store(run, item, repeat, outcome, error, case, scores)


async def _chain_id(run: EvalRun) -> int | None:
    """The id of the run's chain (the budgets of a chain count its judges' calls too)."""
    return await (
        AdvisorChain.objects.filter(slug=run.chain_slug).values_list("pk", flat=True).afirst()
    )


def _discard(user: Any, public: str) -> None:
    """Delete an item's throwaway conversation (its messages, the reply's votes and pending
    approvals go with it; the call log stays)."""
    Conversation.objects.filter(conversation_id=conversation_key(user, public)).delete()


async def _adocuments(outcome: TurnOutcome | None) -> list[dict[str, Any]]:
    return await sync_to_async(_documents)(outcome)


def _store(
    run: EvalRun,
    item: DatasetItem,
    repeat: int,
    outcome: TurnOutcome | None,
    error: str,
    case: Any,
    scores: dict[str, dict[str, Any]],
) -> None:
    call_log = None
    if outcome is not None:
        call_log = CallLog.objects.filter(trace_id=outcome.trace_id).first()
    with transaction.atomic():
        EvalResult.objects.create(
            run=run,
            item=item,
            item_key=item.key,
            repeat=repeat,
            output=case.output,
            documents=list(case.documents),
            tool_calls=list(case.tool_calls),
            scores=scores,
            latency_ms=case.latency_ms,
            usage=outcome.usage if outcome is not None else None,
            cost=dict(outcome.cost) if outcome is not None else {},
            call_log=call_log,
            trace_id=outcome.trace_id if outcome is not None else "",
            error=error,
        )
        rows = []
        for key, score in scores.items():
            columns = _score_value(score["value"])
            if columns is None:
                continue
            rows.append(
                Score(
                    key=key[:64],
                    comment=str(score.get("comment") or "")[:2000],
                    source=Score.Source.EVALUATOR,
                    call_log=call_log,
                    chain_version_id=run.chain_version_id,
                    chain_slug=run.chain_slug,
                    **columns,
                )
            )
        Score.objects.bulk_create(rows)


# -- summary -----------------------------------------------------------------------------------


def _numeric(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value)
    return None


def summarize(results: Iterable[EvalResult]) -> dict[str, Any]:
    """A run's summary: ``items``, ``results`` (items × repeats), ``errors`` (results whose
    turn failed), mean ``latency_ms``, and per score key ``{"mean", "pass_rate", "scored",
    "judged", "passed"}`` over every result — ``mean`` of the boolean (1/0) and numeric
    values, ``pass_rate`` = passed / judged (cases with a pass/fail), ``None`` when there is
    nothing to average."""
    count = errors = 0
    keys: set[str] = set()
    latencies: list[float] = []
    values: dict[str, list[float]] = {}
    judged: dict[str, list[bool]] = {}
    for result in results:
        count += 1
        keys.add(result.item_key)
        errors += bool(result.error)
        if result.latency_ms is not None:
            latencies.append(result.latency_ms)
        for key, score in result.scores.items():
            values.setdefault(key, [])
            judged.setdefault(key, [])
            number = _numeric(score.get("value"))
            if number is not None:
                values[key].append(number)
            if score.get("passed") is not None:
                judged[key].append(bool(score["passed"]))
    evaluators = {
        key: {
            "mean": round(sum(v) / len(v), 6) if v else None,
            "pass_rate": round(sum(judged[key]) / len(judged[key]), 6) if judged[key] else None,
            "scored": len(v),
            "judged": len(judged[key]),
            "passed": sum(judged[key]),
        }
        for key, v in sorted(values.items())
    }
    return {
        "items": len(keys),
        "results": count,
        "errors": errors,
        "latency_ms": round(sum(latencies) / len(latencies), 3) if latencies else None,
        "evaluators": evaluators,
    }
