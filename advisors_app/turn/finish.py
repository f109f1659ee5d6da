"""Finish a turn: its one write, in one thread hop and one transaction, then what follows it.

:func:`finish` is the only writer of a turn. In one transaction it writes

* the turn's messages, in place of the user's message it stored pending before it ran
  (:mod:`advisors_app.memory.pending`; at the same sequence number when nothing came after it:
  the statement that allocates the numbers deletes the pending row) — what its
  :class:`~advisors_app.core.memory.TurnMemory` holds: the memory advisors' appends when the
  chain has memory; otherwise (or when the memory stored nothing but the turn answered) the
  user's message and the reply, an interrupted reply flagged as the memory advisors flag it
  (``metadata["interrupted"]`` and ``["finish_reason"]``), nothing when no text came nor for a
  guard's refusal of the input. The reply carries its turn's
  :class:`~advisors_app.turn.outcome.TurnOutcome` in its metadata (trace id, version, timings,
  sources, tools, usage: :meth:`~advisors_app.turn.outcome.TurnOutcome.reply_metadata`), and its
  id comes back from the rows written (``message_id``, no query);
* one :class:`~advisors_app.models.CallLog` row built from the same outcome (redacted), for
  completed, failed and cancelled turns alike;
* what the ``finish`` hooks write (:mod:`advisors_app.turn.stages`: the costs booked against
  budgets, the approvals a pause leaves);
* and it removes a conversation the turn started if it stored nothing: the outcome then says
  ``conversation_id: None, stored: False``.

Should the messages fail, the call log is written alone (with the ``finish`` hooks, told so), the
pending message is marked interrupted, and the error raised. Once the transaction commits, the
``after_commit`` hooks run (the compaction a session memory asked for is queued). Each stage's
time is in the trace: the call log's up to ``finish`` (the time up to the row itself), the
returned outcome's ``after_commit`` too. :func:`finish` is shielded: a turn being cancelled is
still finished (:func:`~advisors_app.turn.shutdown.finishing`).
"""

from __future__ import annotations

import time
from dataclasses import replace
from functools import partial
from typing import Any

from django.db import transaction

from advisors_app.core.advisors.safe_guard import SAFEGUARD_STAGE
from advisors_app.core.exceptions import ProviderError
from advisors_app.core.finish_reasons import finish_category
from advisors_app.core.memory import CANCELLED, ERROR, FINISH_REASON, INTERRUPTED, HeldAppend
from advisors_app.core.messages import AssistantMessage, MessageType, UserMessage
from advisors_app.core.requests import ChatClientResponse
from advisors_app.core.serialization import to_jsonable
from advisors_app.db.threads import db_sync_to_async
from advisors_app.memory.conversations import discard_if_empty
from advisors_app.memory.pending import mark_interrupted
from advisors_app.models import CallLog
from advisors_app.security.redaction import redact, redact_data
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.turn import stages
from advisors_app.turn.outcome import TurnOutcome
from advisors_app.turn.shutdown import finishing, stopping
from advisors_app.turn.state import Finished, Turn

__all__ = ["finish", "outcome_of", "write_messages"]

_repository = DjangoChatMemoryRepository()
_ASSISTANT = MessageType.ASSISTANT.value


def _interruption(status: str) -> str | None:
    """``None`` for a completed turn, else why it ended early: ``CANCELLED`` or ``ERROR``."""
    if status == CallLog.Status.OK:
        return None
    return CANCELLED if status == CallLog.Status.CANCELLED else ERROR


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _prompt_dict(prompt: Any) -> dict[str, Any] | None:
    if prompt is None:
        return None
    options = prompt.options
    return {
        "messages": [m.to_dict() for m in prompt.instructions],
        "options": options.to_dict() if options is not None else None,
    }


def outcome_of(
    turn: Turn,
    status: str,
    response: ChatClientResponse | None,
    time_to_first_token: float | None = None,
) -> TurnOutcome:
    """The turn's outcome so far (``status``: a ``CallLog.Status``); what it stored is added by
    :func:`finish`."""
    chat = response.chat_response if response is not None else None
    usage = metadata = finish_reason = None
    if chat is not None:
        usage = chat.metadata.usage.to_dict() if chat.metadata.usage is not None else None
        finish_reason = chat.result.metadata.finish_reason if chat.result is not None else None
        metadata = to_jsonable(dict(chat.metadata.extra))
    # An interrupted turn says why, as its stored reply does (the memory advisors' flag).
    finish_reason = finish_reason or _interruption(status)
    category = finish_category(finish_reason, chat.metadata if chat is not None else None)
    latency = time.perf_counter() - turn.started
    return TurnOutcome(
        status=status,
        conversation_id=turn.conversation_id,
        content=chat.text if chat is not None else "",
        usage=usage,
        metadata=metadata or {},
        finish_reason=finish_reason,
        finish_category=category.value if category is not None else None,
        trace_id=turn.trace_id,
        chain=turn.compiled.slug,
        version=turn.target.number,
        sources=turn.sources.of_outcome(metadata),
        tools=[dict(entry) for entry in turn.tools],
        timings={"latency_ms": _ms(latency), "time_to_first_token_ms": _ms(time_to_first_token)},
        prompt=_prompt_dict(turn.final_prompt),
        trace={**turn.trace.to_dict(), "stages": dict(turn.times.seconds)},
        cost=turn.meter.cost(),
        budget_warnings=[w.to_dict() for w in turn.meter.warnings],
        experiment=_experiment(turn),
        guard=list(turn.guard),
    )


def _experiment(turn: Turn) -> dict[str, Any] | None:
    arm = turn.target.arm
    return None if arm is None else {"id": arm[0], "arm": arm[1]}


def _hold_the_exchange(turn: Turn, response: ChatClientResponse | None, status: str) -> None:
    """Hold the user's message and the reply when the chain's memory stored nothing: a memory
    advisor decides what of a turn its conversation keeps. Not for a guard's refusal of the
    input (not a turn of the conversation: a memory chain does not store it either), nor when
    no reply came; an interrupted reply is flagged as the memory advisors flag it, and not
    held without text."""
    if turn.memory.appends or _refused_input(response):
        return
    chat = response.chat_response if response is not None else None
    if chat is None or chat.result is None:
        return
    reply = chat.result.output
    reason = _interruption(status)
    if reason is not None:
        if not reply.text.strip():
            return
        reply = AssistantMessage(reply.text, {INTERRUPTED: True, FINISH_REASON: reason})
    turn.memory.append([UserMessage(turn.message), reply])


def _refused_input(response: ChatClientResponse | None) -> bool:
    chat = response.chat_response if response is not None else None
    return chat is not None and chat.metadata.get(SAFEGUARD_STAGE) == "input"


def _with_reply_metadata(appends: list[HeldAppend], metadata: dict[str, Any]) -> list[HeldAppend]:
    """``appends`` with ``metadata`` added to the reply: their last assistant message (keys it
    has keep their value: an interrupted reply's ``finish_reason``, say)."""
    for at in range(len(appends) - 1, -1, -1):
        messages = list(appends[at].messages)
        for index in range(len(messages) - 1, -1, -1):
            message = messages[index]
            if isinstance(message, AssistantMessage):
                messages[index] = replace(message, metadata={**metadata, **message.metadata})
                held = replace(appends[at], messages=tuple(messages))
                return [*appends[:at], held, *appends[at + 1 :]]
    return appends


def write_messages(
    conversation_key: str,
    appends: list[HeldAppend],
    reply_metadata: dict[str, Any],
    pending: int | None = None,
) -> tuple[int | None, int | None]:
    """Blocking, in the caller's transaction: write a turn's held ``appends``, the reply —
    their last assistant message — with ``reply_metadata`` added (keys it has keep their
    value), in place of the turn's ``pending`` message (its id; removed too when nothing is
    written); ``(the reply's id, the conversation's pk)`` from the rows written, ``None`` for
    what was not written."""
    appends = _with_reply_metadata(appends, reply_metadata)
    rows = _repository.write_held(conversation_key, appends, pending)
    reply = next((row.pk for row in reversed(rows) if row.message_type == _ASSISTANT), None)
    return reply, rows[-1].conversation_id if rows else None


def _call_log(turn: Turn, outcome: TurnOutcome, exc: BaseException | None) -> CallLog:
    latency_ms = outcome.timings["latency_ms"] or 0.0
    first_ms = outcome.timings.get("time_to_first_token_ms")
    return CallLog(
        **turn.meter.summary(),
        chain_id=turn.target.chain_id,
        chain_slug=outcome.chain,
        config_hash=turn.compiled.snapshot_hash,
        chain_version_id=turn.target.version_id,
        label=turn.target.label,
        user_id=turn.user.pk,
        conversation_id=turn.conversation_key,
        trace_id=outcome.trace_id,
        mode=turn.mode,
        status=outcome.status,
        latency=latency_ms / 1000,
        time_to_first_token=None if first_ms is None else first_ms / 1000,
        usage=outcome.usage or {},
        finish_reason=outcome.finish_reason or "",
        finish_category=outcome.finish_category or "",
        error_type=type(exc).__name__ if exc is not None else "",
        # Redacted before it is cut, so a key is never left half-cut
        # (advisors_app.security.redaction).
        error_message=redact(str(exc))[:2000] if exc is not None else "",
        provider_status=exc.status if isinstance(exc, ProviderError) else None,
        trace=redact_data(outcome.trace),
        experiment_id=turn.target.arm[0] if turn.target.arm else None,
        experiment_arm=turn.target.arm[1] if turn.target.arm else "",
        guard_verdicts=redact_data(outcome.guard),
    )


def _write(
    turn: Turn,
    outcome: TurnOutcome,
    response: ChatClientResponse | None,
    exc: BaseException | None,
) -> TurnOutcome:
    """Blocking: the turn's one transaction (see the module docstring); the outcome with what
    was stored."""
    started = time.perf_counter()
    try:
        with transaction.atomic():
            _hold_the_exchange(turn, response, outcome.status)
            message_id, conversation_pk = write_messages(
                turn.conversation_key,
                turn.memory.appends,
                outcome.reply_metadata(),
                _replaced_pending(turn),
            )
            turn.times.add(stages.Stage.FINISH, started)  # up to the call log that records it
            written = replace(
                outcome,
                message_id=message_id,
                stored=message_id is not None,
                trace={**outcome.trace, "stages": dict(turn.times.seconds)},
            )
            log = _call_log(turn, written, exc)
            log.save(force_insert=True)
            finished = Finished(turn, written, log, message_id, conversation_pk)
            stages.run_hooks(stages.Stage.FINISH, finished)
            removed = (
                turn.new_conversation
                and message_id is None
                and discard_if_empty(turn.conversation_key)
            )
            if removed:
                finished.outcome = replace(finished.outcome, conversation_id=None)
            transaction.on_commit(partial(_after_commit, finished), robust=True)
    except Exception:
        with transaction.atomic():
            # The user's message stays, marked: the turn did not store it.
            if turn.pending_message is not None:
                mark_interrupted([turn.pending_message], ERROR)
            # The hooks' writes were rolled back with the messages: made again, told so.
            log = _call_log(turn, outcome, exc)
            log.save(force_insert=True)
            stages.run_hooks(
                stages.Stage.FINISH, Finished(turn, outcome, log, messages_failed=True)
            )
        raise
    return finished.outcome


def _replaced_pending(turn: Turn) -> int | None:
    """The turn's pending message for its write to replace (or remove, when the turn stores
    nothing: a failed call, a refused input, a cancel before any text — as before the message
    was stored early). ``None`` when there is none, or when the server is stopping and the turn
    stores nothing: the message is kept then, marked interrupted, since the user did not stop
    the turn."""
    pending = turn.pending_message
    if pending is not None and not turn.memory.appends and stopping():
        mark_interrupted([pending])
        return None
    return pending


def _after_commit(finished: Finished) -> None:
    """The ``after_commit`` hooks, timed: the outcome's trace gets their time (the call log,
    written before, cannot)."""
    started = time.perf_counter()
    stages.run_hooks(stages.Stage.AFTER_COMMIT, finished)
    times = finished.turn.times
    times.add(stages.Stage.AFTER_COMMIT, started)
    trace = {**finished.outcome.trace, "stages": dict(times.seconds)}
    finished.outcome = replace(finished.outcome, trace=trace)


async def finish(
    turn: Turn,
    outcome: TurnOutcome,
    response: ChatClientResponse | None,
    exc: BaseException | None = None,
) -> TurnOutcome:
    """Write the turn (one thread hop, one transaction; see the module docstring), shielded
    from a cancel of the caller, and return its ``outcome`` saying what it left stored: the
    reply's id, and the conversation or ``None`` for one the turn started and left empty
    (removed). Compactions asked of a session store without a task queue are handed to it
    then (``CompactionRequest.submit``)."""
    written = await finishing(db_sync_to_async(_write)(turn, outcome, response, exc))
    for request in turn.memory.compactions:
        if not stages.queues(request):
            await request.submit()
    return written
