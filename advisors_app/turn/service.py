"""Run one chat turn through a stored chain: the one service every transport calls.

The admin playground, the REST views (``call`` and SSE ``stream``) and the websocket consumer
all go through :func:`call_turn` or :func:`stream_turn`. Both take the same input — chain slug,
user, and a :class:`~advisors_app.turn.input.TurnInput` (message, optional conversation id,
params, ``label`` or ``version``; or those as arguments) — and:

1. validate it before anything runs: a blank or oversized message, a malformed conversation
   id, an unknown or disabled chain, a label or version that does not exist or (for anyone
   but staff) is not ``production``, params the chain does not accept, then — valid input
   only — the user's chat rate (:mod:`advisors_app.turn.throttling`) →
   :class:`TurnError` with field errors (REST: HTTP ``error.http_status``; websocket: an
   ``error`` frame from ``error.to_event()``), every field's errors at once; nothing is
   stored;
2. in one thread hop (``_open``): choose the chain version
(:mod:`advisors_app.definition.runtime`): the
   label's, or the one the conversation started on when the chain pins conversations; read
   the user's conversation (:mod:`advisors_app.memory.conversations`: ids are namespaced per owner,
   so another user's id behaves as one never used), count the rate, create the conversation
   recording that version when new, and read the window a memory advisor will need into the
   turn's :class:`~advisors_app.stores.memory.TurnScope`;
3. refuse a message that alone cannot fit the chat model's context window
   (:class:`TurnError` ``context_overflow``, HTTP 400, before the chain runs: a stream is
   refused before it opens; the call log says so, a conversation the turn started is removed);
   every model call of the chain checks its whole prompt too (``core.context_window``), and a
   prompt that grew past the window (history, retrieved context, a tool round) fails the turn
   with ``ContextOverflowError`` → ``error_event`` code ``context_overflow`` (REST 400, an
   ``error`` event in a stream that has started), stored as any failed turn: call log only;
4. run the chain (call) or yield :mod:`stream events <advisors_app.turn.events>`, recording the
   per-advisor trace (``core.tracing.CallTrace``, plus OpenTelemetry spans); who the turn is
   for (``core.attributes.PRINCIPAL``), its trace id (``TRACE_ID``) and its conversation are in
   the request context from the start; the memory advisor's reads of the conversation are
   answered from the scope and its append is held there; tool calls and retrieval's sources
   are recorded as they happen;
5. in one thread hop and one transaction (``_write``): the turn's messages — what the scope
   holds: the memory advisor's append when the chain has one; otherwise the service's (an
   interrupted reply flagged as the memory advisors flag it: ``metadata["interrupted"]`` and
   ``["finish_reason"]``; nothing when no text came, nor for a guard's refusal of the input)
   —, the reply carrying its turn's :class:`~advisors_app.turn.events.TurnOutcome` in its metadata
   (trace id, version, timings, sources, tools, usage), and one
   :class:`~advisors_app.models.CallLog` row built from the same outcome (redacted), for
   completed, failed and cancelled turns alike (cancellations shielded so the row is written
   even while being cancelled; should the messages fail, the row is written alone). The
   stored reply's id comes from the rows written (``message_id``, no query). A conversation
   the turn started is removed in the same transaction if it stored nothing: the outcome says
   ``conversation_id: None, stored: False`` then.

A later turn of a chain with a memory advisor costs two thread hops and six SQL statements in
one commit: version, conversation, window; sequence numbers, messages, call log.

Params (JSON object): ``options`` (the per-request chat options: ``temperature``,
``max_tokens``, ``top_p``, ``top_k``, ``stop``, ``seed``, penalties), ``system_params`` (values
for the chain's system-template placeholders), and the context params the chain's advisor types
declare (for example ``qa_filter_expression``). Anything else is refused. All database work
runs off the event loop (:func:`~advisors_app.db.threads.db_sync_to_async`: no pooled
connection is held while the answer streams).
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from django.conf import settings
from django.db import transaction

from advisors_app.approvals.pauses import Resume, active_grants, claim, open_resume, record_turn
from advisors_app.conf import app_settings
from advisors_app.core.advisors.safe_guard import SAFEGUARD_STAGE
from advisors_app.core.advisors.tool_calling import (
    APPROVAL_REQUIRED,
    PENDING_APPROVALS,
    RESUMED_ROUND,
)
from advisors_app.core.aggregation import ChatClientResponseAccumulator
from advisors_app.core.attributes import (
    CONVERSATION_ID,
    OWNER,
    PRINCIPAL,
    TOOL_APPROVAL_GRANTS,
    TOOL_CALL_DECISIONS,
    TRACE_ID,
)
from advisors_app.core.client import ChatClientRequestSpec
from advisors_app.core.context_window import check_context_window
from advisors_app.core.exceptions import ContextOverflowError, ProviderError
from advisors_app.core.memory import CANCELLED, ERROR, FINISH_REASON, INTERRUPTED
from advisors_app.core.messages import AssistantMessage, ToolCall, UserMessage
from advisors_app.core.metering import MODEL_CALL_METER
from advisors_app.core.prompt import ChatOptions, Prompt, merge_options
from advisors_app.core.requests import ChatClientResponse
from advisors_app.core.serialization import to_jsonable
from advisors_app.core.streams import closing_stream
from advisors_app.core.tracing import CallTrace, CompositeObserver, OpenTelemetryObserver
from advisors_app.costs.budgets import applicable_budgets, precheck
from advisors_app.costs.metering import TurnMeter
from advisors_app.costs.pricing import price_book
from advisors_app.db.prepared import rows_together
from advisors_app.db.threads import db_sync_to_async
from advisors_app.definition.runtime import (
    DRAFT,
    ChainConfigurationError,
    ChainNotFound,
    ChainTarget,
    CompiledChain,
    VersionNotFound,
    compiled_chain,
    resolve_target,
    target_of,
    target_read,
)
from advisors_app.memory.conversations import (
    StoredConversation,
    conversation_key,
    create_conversation,
    discard_if_empty,
    turn_conversation_of,
    turn_conversation_read,
)
from advisors_app.models import PRODUCTION, CallLog, VersionPolicy
from advisors_app.security.redaction import redact, redact_data
from advisors_app.stores.memory import DjangoChatMemoryRepository, TurnScope
from advisors_app.stores.scoped import user_tenant
from advisors_app.turn.events import (
    ApprovalRequiredEvent,
    BudgetWarningEvent,
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    SourcesEvent,
    StartEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnError,
    TurnEvent,
    TurnOutcome,
    budget_exceeded,
    error_event,
)
from advisors_app.turn.input import TurnInput
from advisors_app.turn.sources import RETRIEVAL_KEYS, cited_sources
from advisors_app.turn.throttling import chat_turn_wait
from advisors_app.validation import FieldErrors, schema_errors

__all__ = [
    "PreparedTurn",
    "TurnStream",
    "call_turn",
    "prepare_turn",
    "stop_running_turns",
    "stream_turn",
]

_T = TypeVar("_T")
logger = logging.getLogger(__name__)
_telemetry = OpenTelemetryObserver()
_repository = DjangoChatMemoryRepository()
#: Tasks that finish a cancelled turn (log row, transcript); the loop keeps only weak refs.
_finishing: set[asyncio.Task[Any]] = set()
#: Tasks running a turn now: call_turn's, or the one iterating a TurnStream.
_running: set[asyncio.Task[Any]] = set()


def _running_turn_started() -> None:
    task = asyncio.current_task()
    if task is not None and task not in _running:
        _running.add(task)
        task.add_done_callback(_running.discard)


def _running_turn_ended() -> None:
    task = asyncio.current_task()
    if task is not None:
        _running.discard(task)


async def stop_running_turns(timeout: float = 10.0) -> None:
    """Stop every turn running in this process, as a client disconnect would: the partial
    replies are stored flagged as interrupted and the call logs say cancelled. Waits at most
    ``timeout`` seconds. For a server shutting down (see :mod:`advisors_app.turn.shutdown`).
    """
    running = [task for task in _running if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=timeout)
    if _finishing:
        await asyncio.wait(list(_finishing), timeout=timeout)


@dataclass
class _Turn:
    """A validated turn, ready to run (internal)."""

    compiled: CompiledChain
    target: ChainTarget
    user: Any
    message: str
    conversation_key: str
    conversation_id: str
    context: dict[str, Any]
    options: ChatOptions | None
    system: str | None
    mode: str
    #: Also in ``context`` (``TRACE_ID``): the stored reply carries it.
    trace_id: str
    trace: CallTrace
    #: The conversation as this turn reads and writes it (the window read ahead, the writes
    #: held until :func:`_finish`).
    scope: TurnScope
    #: The last prompt that reached the model (serialised only for the outcome, after the
    #: turn: not on the way to its first token).
    final_prompt: Any = None
    started: float = field(default_factory=time.perf_counter)
    #: Whether this turn created the conversation (removed again if the turn stores nothing).
    new_conversation: bool = False
    #: The conversation's title as the turn found or made it.
    title: str = ""
    #: The tool calls run so far, as the outcome lists them (``id``, ``name``, ...).
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: Where a stream's tool events go as they happen (``None``: a call, or no tool loop).
    tool_events: asyncio.Queue[Any] | None = None
    #: What the stream's ``sources`` event named (``None``: not sent). An interrupted turn's
    #: response has not got them in its metadata yet: its outcome keeps these.
    sources: list[dict[str, Any]] | None = None
    #: A resume of tool calls paused for approval: the claimed decisions (``None``: a message).
    resume: Resume | None = None
    #: Prices and budgets every model call of the turn goes through
    # (``advisors_app.costs.metering``).
    meter: TurnMeter | None = None

    def running(self) -> Any:
        """Enter the turn's conversation scope (around each step of the turn); the user it
        runs for travels in the request context (``PRINCIPAL``) only."""
        return _repository.scoped(self.scope)

    def spec(self) -> ChatClientRequestSpec:
        spec = self.compiled.client.prompt(self.message).advisor_params(self.context)
        if self.system is not None:
            spec = spec.system(self.system)
        if self.options is not None:
            spec = spec.options(self.options)
        return spec.observer(CompositeObserver(_telemetry, self.trace, _TurnRecorder(self)))


class _TurnRecorder:
    """Keeps what the turn's outcome reports besides the response: the (uncut) prompt of the
    last request that reached the model, and each tool call as it starts and ends (a stream
    also gets them as ``tool_call`` / ``tool_result`` events, at once)."""

    def __init__(self, turn: _Turn) -> None:
        self._turn = turn
        self._calls: dict[int, dict[str, Any]] = {}  # by the ToolCall object: ids may repeat

    def _record(self, advisor: Any, request: Any) -> None:
        if getattr(advisor, "is_model_advisor", False):
            turn = self._turn
            turn.final_prompt = request.prompt
            if turn.tool_events is not None and turn.sources is None:
                # Retrieval ran before the model's first round: its sources go out before
                # that round's tool events.
                sources = cited_sources(request.context)
                if sources:
                    turn.sources = sources
                    turn.tool_events.put_nowait(SourcesEvent(sources))

    def observe_call(self, advisor: Any, request: Any, proceed: Any) -> Any:
        self._record(advisor, request)
        return proceed(request)

    def observe_stream(self, advisor: Any, request: Any, proceed: Any) -> Any:
        self._record(advisor, request)
        return proceed(request)

    def tool_call_started(self, call: ToolCall) -> None:
        entry = {"id": call.id, "name": call.name, "arguments": call.arguments}
        entry.update(ok=None, error=None, duration_ms=None)
        self._calls[id(call)] = entry
        self._turn.tools.append(entry)
        if self._turn.tool_events is not None:
            self._turn.tool_events.put_nowait(ToolCallEvent(call.id, call.name, call.arguments))

    def tool_call_finished(
        self, call: ToolCall, ok: bool, error: str | None, duration: float
    ) -> None:
        duration_ms = round(duration * 1000, 3)
        error = redact(error) if error else error  # a tool's error text may quote a secret
        self._calls.pop(id(call), {}).update(ok=ok, error=error, duration_ms=duration_ms)
        if self._turn.tool_events is not None:
            event = ToolResultEvent(call.id, call.name, ok, error, duration_ms)
            self._turn.tool_events.put_nowait(event)


def _user_errors(user: Any) -> TurnError | None:
    if user is None or not getattr(user, "is_authenticated", False):
        return TurnError("not_authenticated", "Authentication is required.", http_status=401)
    return None


def _params_errors(compiled: CompiledChain, params: Any) -> FieldErrors:
    if not isinstance(params, Mapping):
        return {"params": ["Enter a JSON object."]}
    if not params:
        # A copy: the caller adds to it.
        return {field: list(errs) for field, errs in compiled.empty_params_errors.items()}
    return schema_errors(compiled.params_schema, dict(params), "params")


def _check_target_permission(user: Any, label: str | None, version: int | str | None) -> None:
    """Anything but the ``production`` label is for staff: drafts and other versions are
    for trying out, not for end users."""
    if (version is not None or label not in (None, PRODUCTION)) and not user.is_staff:
        raise TurnError(
            "permission_denied",
            "Only staff may choose a chain version or label other than production.",
            http_status=403,
        )


def _check_same_chain(
    chain: str, target: ChainTarget, stored: StoredConversation | None, key: str
) -> None:
    """Refuse a conversation that started on another chain (409 ``conflict``): its history,
    memory and version belong to that chain, and another chain continuing it would answer from
    a history it did not write (the JSON chain copied the plain chain's last reply)."""
    if stored is None:
        return
    started_on = stored.chain_version_chain_id
    if stored.chain_version_id is None:
        # Started on a draft (staff), which records no version: the chain its turns logged
        # (one query, for such conversations only).
        logged = CallLog.objects.filter(conversation_id=key).exclude(chain=None)
        started_on = logged.values_list("chain_id", flat=True).first()
    if started_on in (None, target.chain_id):
        return
    message = (
        f"This conversation was started on another chain; start a new conversation (send no "
        f"conversation_id) to talk to chain {chain!r}."
    )
    raise TurnError("conflict", message, errors={"conversation_id": [message]}, http_status=409)


def _pinned(target: ChainTarget, stored: StoredConversation | None) -> ChainTarget:
    """``target``, or the version the caller's conversation started on (when it is of this
    chain and the chain pins conversations)."""
    if (
        target.version_policy != VersionPolicy.PIN
        or stored is None
        or stored.chain_version_id is None
        or stored.chain_version_chain_id != target.chain_id
        or stored.chain_version_id == target.version_id
    ):
        return target
    return replace(
        target,
        version_id=stored.chain_version_id,
        number=stored.chain_version_number,
        snapshot_hash=stored.chain_version_snapshot_hash or "",
    )


def _compiled(
    chain: str, user: Any, data: TurnInput, target: ChainTarget, trace_id: str
) -> CompiledChain:
    """The built chain; a chain that cannot be built is ``chain_misconfigured`` (500), which
    says why only to staff: the configuration is theirs, not the caller's business. The
    detail is logged with the trace id the caller is given."""
    try:
        return compiled_chain(target)
    except ChainConfigurationError as exc:
        if data.version == DRAFT:  # only staff run drafts
            raise TurnError(
                "invalid",
                f"The draft of chain {chain!r} cannot run: {exc}",
                errors={"version": [f"The draft cannot run: {exc}"]},
            ) from exc
        logger.error("Chain %r cannot run (trace %s): %s", chain, trace_id, exc)
        detail = f": {exc}" if user.is_staff else "; staff can find why by the trace id"
        raise TurnError(
            "chain_misconfigured",
            f"Chain {chain!r} cannot run (trace {trace_id}){detail}",
            http_status=500,
            trace_id=trace_id,
        ) from exc


def _target(
    chain: str, label: str | None, version: int | str | None, rows: list[tuple[Any, ...]] | None
) -> ChainTarget:
    """The version to run, from the rows of :func:`~advisors_app.definition.runtime.target_read`
    (``None``: the draft, read here)."""
    try:
        if rows is None:
            return resolve_target(chain, label=label, version=version)
        return target_of(chain, rows, label=label, version=version)
    except ChainNotFound:
        raise TurnError(
            "chain_not_found",
            f"No enabled chain {chain!r}.",
            errors={"chain": [f"No enabled chain {chain!r}."]},
            http_status=404,
        ) from None
    except VersionNotFound as exc:
        field_name = "label" if label is not None or version is None else "version"
        raise TurnError(
            "version_not_found", str(exc), errors={field_name: [str(exc)]}, http_status=404
        ) from None


#: Per chain, how many messages its memory read first on the chain's last turn in this
#: process (0: no memory): the window read with the version, before the chain is known.
_window_reads: dict[str, int] = {}


@dataclass(frozen=True, slots=True)
class _Read:
    """What a turn reads in its one round trip: the version, the caller's conversation, and
    the conversation's newest ``prefetch`` messages (``window``; ``None``: not read)."""

    target: ChainTarget
    stored: StoredConversation | None
    prefetch: int
    window: list[tuple[Any, ...]] | None


def _read(chain: str, user: Any, data: TurnInput, errors: FieldErrors) -> _Read:
    """The version, the caller's conversation and its window, in one round trip
    (:func:`~advisors_app.db.prepared.rows_together`). The window's size is the chain's memory
    read of its last turn here (:data:`_window_reads`); :func:`_scope` reads again in the
    rare case that is too few."""
    label, version, conversation_id = data.label, data.version, data.conversation_id
    reads = [] if version == DRAFT else [target_read(chain, label=label, version=version)]
    prefetch = 0
    if not errors and conversation_id is not None:
        reads.append(turn_conversation_read(user, conversation_id))
        prefetch = _window_reads.get(chain, TurnScope.PREFETCH)
        if prefetch:
            key = conversation_key(user, conversation_id)
            reads.append(_repository.window_read(key, prefetch))
    rows = iter(rows_together(*reads) if reads else ())
    target = _target(chain, label, version, None if version == DRAFT else next(rows))
    if errors or conversation_id is None:
        return _Read(target, None, 0, None)
    stored = turn_conversation_of(user, next(rows))
    return _Read(target, stored, prefetch, next(rows) if prefetch else None)


def _scope(
    chain: str, key: str, stored: StoredConversation, compiled: CompiledChain, read: _Read
) -> TurnScope:
    """The turn's view of its stored conversation: the window :func:`_read` read, when it
    holds what the chain's memory reads first."""
    needed = (compiled.memory_read or TurnScope.PREFETCH) if compiled.has_memory else 0
    _window_reads[chain] = needed
    if not needed:
        return TurnScope(key)
    if read.window is not None and read.prefetch >= needed:
        return _repository.scope_of(key, stored.last_sequence, read.prefetch, read.window)
    return _repository.open_turn(
        key, conversation_pk=stored.pk, last_sequence=stored.last_sequence, prefetch=needed
    )


@dataclass(frozen=True, slots=True)
class _Opened:
    """What :func:`_open` read: the version to run, the conversation and its window."""

    target: ChainTarget
    compiled: CompiledChain
    params: Mapping[str, Any]
    key: str
    public: str
    created: bool
    title: str
    scope: TurnScope
    #: The tools needing no approval in this conversation ("allow for this conversation").
    granted: list[str]
    resume: Resume | None
    #: Prices and budgets every model call of the turn goes through.
    meter: TurnMeter


def _meter(
    compiled: CompiledChain, user: Any, chain_id: int | None, message: str, params: Any
) -> TurnMeter:
    """Blocking: the turn's meter, with the prices and the budgets that count it; raises
    ``budget_exceeded`` (429) when a budget cannot take even the turn's cheapest first call
    (:func:`advisors_app.costs.budgets.precheck`), so a stream is refused before it opens."""
    budgets = applicable_budgets(user, chain_id, lambda: user_tenant(user))
    meter = TurnMeter(compiled.model_refs, price_book(), budgets, user)
    if budgets:
        client = compiled.client
        options = merge_options(
            client.default_options, ChatOptions.from_dict(params.get("options") or {})
        )
        floors = meter.floor_estimates(client.chat_model, message, options)
        refusal, warnings, tripped = precheck(budgets, floors, user)
        if refusal is not None:
            raise budget_exceeded(refusal)
        meter.start(warnings, tripped)
    return meter


def _open(chain: str, user: Any, data: TurnInput, errors: FieldErrors, trace_id: str) -> _Opened:
    """Everything a turn reads before it runs, in one thread hop (blocking): the version
    (one query, none more when its chain is built already), the caller's conversation with
    the version it started on (one query), the rate, the conversation created when new, and
    the window a memory advisor will read (one round trip for the three, :func:`_read`).
    Raises :class:`TurnError`."""
    label, version, conversation_id = data.label, data.version, data.conversation_id
    read = _read(chain, user, data, errors)
    target, stored = read.target, read.stored
    if stored is not None and conversation_id is not None:
        _check_same_chain(chain, target, stored, conversation_key(user, conversation_id))
        # Naming ``production`` is what everyone may name: the same as naming nothing.
        if version is None and label in (None, PRODUCTION):
            target = _pinned(target, stored)
    compiled = _compiled(chain, user, data, target, trace_id)
    params = {} if data.params is None else data.params
    errors.update(_params_errors(compiled, params))
    if errors:
        raise TurnError("invalid", "The request is invalid.", errors=errors)
    granted = active_grants(stored.pk) if compiled.may_pause and stored is not None else []
    if data.resumes:
        decisions = data.resume_decisions()
        pending = open_resume(user, stored.pk if stored else None, decisions, compiled, granted)
    meter = _meter(compiled, user, target.chain_id, data.message, params)
    # Counted only now that the input is valid: refused requests never use up the rate.
    wait = chat_turn_wait(user)
    if wait is not None:
        raise TurnError(
            "throttled",
            f"Too many messages: try again in {math.ceil(wait)} s.",
            http_status=429,
            retry_after=wait,
        )
    resume = None
    if data.resumes:
        with transaction.atomic():
            resume = claim(user, pending, decisions)
        granted = [*granted, *resume.granted]
    if stored is None:
        key, public, created, title = create_conversation(
            user, conversation_id, title=data.message, chain_version_id=target.version_id
        )
        scope = _repository.open_turn(key, conversation_pk=None, last_sequence=0)
        if not created:  # made by a concurrent request meanwhile: read it as it is
            scope = TurnScope(key)
    else:
        public = conversation_id or ""
        key, created, title = conversation_key(user, public), False, stored.title
        scope = _scope(chain, key, stored, compiled, read)
    return _Opened(
        target,
        compiled,
        params,
        key,
        public,
        created,
        title,
        scope,
        granted,
        resume,
        meter,
    )


def _checked(user: Any, data: TurnInput) -> FieldErrors:
    """The checks that need no database: the user, the fields (raises when the version to
    check params against is unknown), the permission to choose a version; the field errors
    left for :func:`_open` to report with the params'."""
    refused = _user_errors(user)
    if refused is not None:
        raise refused
    errors = data.errors()
    if "label" in errors or "version" in errors:  # the version to check params against is unknown
        raise TurnError("invalid", "The request is invalid.", errors=errors)
    _check_target_permission(user, data.label, data.version)
    return errors


async def _prepare(
    chain: str, user: Any, data: TurnInput, mode: str, trace_payloads: bool = False
) -> _Turn:
    errors = _checked(user, data)
    # Known before the chain runs: whoever stores the reply writes it into its metadata.
    trace_id = uuid.uuid4().hex
    opened = await db_sync_to_async(_open)(chain, user, data, errors, trace_id)
    return _turn(user, data, mode, trace_payloads, trace_id, opened)


def prepare_turn(
    chain: str, user: Any, data: TurnInput, mode: str, *, trace_payloads: bool = False
) -> PreparedTurn:
    """Blocking: validate a turn and do its reads (what :func:`call_turn` and
    :func:`stream_turn` do first, in their one thread hop), for a transport that is on a
    thread where database work may run already — DRF's request checks, say — so that the turn
    costs no hop of its own before it runs. ``mode`` is ``CallLog.Mode.CALL`` or ``STREAM``;
    pass the result to :func:`call_turn` or :func:`stream_turn` as the message. Raises
    :class:`TurnError` as they do."""
    errors = _checked(user, data)
    trace_id = uuid.uuid4().hex
    opened = _open(chain, user, data, errors, trace_id)
    return PreparedTurn(_turn(user, data, mode, trace_payloads, trace_id, opened))


class PreparedTurn:
    """A turn validated and read by :func:`prepare_turn`, not run yet (opaque; run it once)."""

    __slots__ = ("_turn",)

    def __init__(self, turn: _Turn) -> None:
        self._turn = turn


def _turn(
    user: Any, data: TurnInput, mode: str, trace_payloads: bool, trace_id: str, opened: _Opened
) -> _Turn:
    """The turn to run, from what :func:`_open` read."""
    compiled, params = opened.compiled, opened.params
    context = {k: v for k, v in params.items() if k not in ("options", "system_params")}
    options = ChatOptions.from_dict(params["options"]) if params.get("options") else None
    system = None
    if compiled.system_template is not None:
        system = compiled.system_template.render(params["system_params"])
    context[CONVERSATION_ID] = opened.key
    # Who the turn is for, for the stores (retrieval scoped to the caller's documents) ...
    context[PRINCIPAL] = user
    # ... and as a key of per-user state (the semantic cache).
    context[OWNER] = f"user:{user.pk}"
    context[TRACE_ID] = trace_id
    if opened.granted:
        context[TOOL_APPROVAL_GRANTS] = tuple(opened.granted)
    if opened.resume is not None:
        context[TOOL_CALL_DECISIONS] = opened.resume.decisions
    meter = opened.meter
    context[MODEL_CALL_METER] = meter
    return _Turn(
        compiled,
        opened.target,
        user,
        data.message,
        opened.key,
        opened.public,
        context,
        options,
        system,
        mode,
        trace_id,
        CallTrace(capture_payloads=_keeps_payloads(trace_payloads)),
        opened.scope,
        new_conversation=opened.created,
        title=opened.title,
        resume=opened.resume,
        meter=meter,
    )


def _keeps_payloads(asked: bool) -> bool:
    """Whether this turn's trace keeps every advisor's request and response: when asked (the
    playground), in ``DEBUG``, and for ``ADVISORS["TRACE_PAYLOAD_SAMPLE"]`` of the other turns.
    The rest keep times and status only, which costs a fraction per streamed chunk."""
    if asked or settings.DEBUG:
        return True
    share = app_settings.TRACE_PAYLOAD_SAMPLE
    return share > 0 and random.random() < share


def _interruption(status: str) -> str | None:
    """``None`` for a completed turn, else why it ended early: ``CANCELLED`` or ``ERROR``."""
    if status == CallLog.Status.OK:
        return None
    return CANCELLED if status == CallLog.Status.CANCELLED else ERROR


def _outcome(
    turn: _Turn,
    status: str,
    response: ChatClientResponse | None,
    time_to_first_token: float | None = None,
) -> TurnOutcome:
    """The turn's outcome so far (what it stored is added by :func:`_write`)."""
    chat = response.chat_response if response is not None else None
    usage = metadata = finish = None
    if chat is not None:
        usage = chat.metadata.usage.to_dict() if chat.metadata.usage is not None else None
        finish = chat.result.metadata.finish_reason if chat.result is not None else None
        metadata = to_jsonable(dict(chat.metadata.extra))
    # An interrupted turn says why, as its stored reply does (the memory advisors' flag).
    finish = finish or _interruption(status)
    latency = time.perf_counter() - turn.started
    return TurnOutcome(
        status=status,
        conversation_id=turn.conversation_id,
        content=chat.text if chat is not None else "",
        usage=usage,
        metadata=metadata or {},
        finish_reason=finish,
        trace_id=turn.trace_id,
        chain=turn.compiled.slug,
        version=turn.target.number,
        sources=cited_sources(metadata) or list(turn.sources or ()),
        tools=[dict(entry) for entry in turn.tools],
        timings={
            "latency_ms": _ms(latency),
            "time_to_first_token_ms": _ms(time_to_first_token),
        },
        prompt=_prompt_dict(turn.final_prompt),
        trace=turn.trace.to_dict(),
        cost=turn.meter.cost() if turn.meter is not None else {},
        budget_warnings=(
            [w.to_dict() for w in turn.meter.warnings] if turn.meter is not None else []
        ),
    )


def _prompt_dict(prompt: Any) -> dict[str, Any] | None:
    if prompt is None:
        return None
    options = prompt.options
    return {
        "messages": [m.to_dict() for m in prompt.instructions],
        "options": options.to_dict() if options is not None else None,
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 3)


def _persist(turn: _Turn, response: ChatClientResponse | None, reason: str | None) -> None:
    """Hold the turn in its scope, unless the chain already did: a memory advisor decides
    what of a turn its conversation keeps, and its append is in the scope (held, or written
    should it have read past what the scope held). Otherwise the service keeps the user's
    message and the reply — except a guard's refusal of the input, which is not a turn of
    the conversation (a memory chain does not store it either).

    ``reason`` is ``None`` for a completed turn, else ``CANCELLED``/``ERROR``: the partial
    reply is flagged as the memory advisors flag it, and nothing is stored without text.
    """
    if turn.scope.pending or turn.scope.written or _refused_input(response):
        return
    chat = response.chat_response if response is not None else None
    if chat is None or chat.result is None:
        return
    reply = chat.result.output
    if reason is not None:
        if not reply.text.strip():
            return
        reply = AssistantMessage(reply.text, {INTERRUPTED: True, FINISH_REASON: reason})
    turn.scope.pending.append(([UserMessage(turn.message), reply], False))


def _refused_input(response: ChatClientResponse | None) -> bool:
    chat = response.chat_response if response is not None else None
    return chat is not None and chat.metadata.get(SAFEGUARD_STAGE) == "input"


def _call_log(turn: _Turn, outcome: TurnOutcome, exc: BaseException | None) -> CallLog:
    latency_ms = outcome.timings["latency_ms"] or 0.0
    first_ms = outcome.timings.get("time_to_first_token_ms")
    costs = turn.meter.summary() if turn.meter is not None else {}
    return CallLog(
        **costs,
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
        error_type=type(exc).__name__ if exc is not None else "",
        # Redacted before it is cut, so a key is never left half-cut
        # (advisors_app.security.redaction).
        error_message=redact(str(exc))[:2000] if exc is not None else "",
        provider_status=exc.status if isinstance(exc, ProviderError) else None,
        trace=redact_data(outcome.trace),
    )


def _write(
    turn: _Turn,
    outcome: TurnOutcome,
    response: ChatClientResponse | None,
    exc: BaseException | None,
) -> TurnOutcome:
    """Blocking: one transaction with the turn's messages — the reply carrying its outcome
    (:meth:`TurnOutcome.reply_metadata`) — and its call log row; the outcome with what was
    stored. Should the messages fail to be written, the call log is still written, alone, and
    the error raised."""
    log = _call_log(turn, outcome, exc)
    try:
        with transaction.atomic():
            if turn.meter is not None:
                turn.meter.settle()
            _persist(turn, response, _interruption(outcome.status))
            turn.scope.annotate_reply(outcome.reply_metadata())
            _repository.write_turn(turn.scope)
            message_id = turn.scope.reply_id()
            log.save(force_insert=True)
            pending = _approvals(turn, outcome, message_id, log)
            removed = (
                turn.new_conversation
                and message_id is None
                and discard_if_empty(turn.conversation_key)
            )
    except Exception:
        log.pk = None
        with transaction.atomic():
            if turn.meter is not None:
                turn.meter.settle()  # rolled back with the messages: booked again here
            log.save(force_insert=True)
        raise
    return replace(
        outcome,
        message_id=message_id,
        stored=message_id is not None,
        conversation_id=None if removed else turn.conversation_id,
        pending_approvals=pending,
    )


def _approvals(
    turn: _Turn, outcome: TurnOutcome, message_id: int | None, log: CallLog
) -> list[dict[str, Any]]:
    """Blocking, in :func:`_write`'s transaction: the approvals the turn leaves (see
    :func:`advisors_app.approvals.pauses.record_turn`); the pending calls it reports."""
    if not turn.compiled.may_pause:
        return []
    paused = outcome.status == CallLog.Status.OK and outcome.finish_reason == APPROVAL_REQUIRED
    written = turn.scope.written
    return record_turn(
        user=turn.user,
        chain_slug=turn.compiled.slug,
        conversation_pk=written[-1].conversation_id if written else None,
        message_id=message_id,
        call_log=log,
        pending=list(outcome.metadata.get(PENDING_APPROVALS) or ()) if paused else [],
        resume=turn.resume,
        ran=list(outcome.metadata.get(RESUMED_ROUND) or ()),
        approver_permission=turn.compiled.approver_permission,
    )


async def _finish(
    turn: _Turn,
    outcome: TurnOutcome,
    response: ChatClientResponse | None,
    exc: BaseException | None = None,
) -> TurnOutcome:
    """Persist the turn (see :func:`_persist`; a memory advisor's append is held in the
    turn's scope) and write its call log row — one transaction, one thread hop — and return
    its ``outcome`` saying what it left stored: the reply's id, and the conversation or
    ``None`` for one the turn started and left empty (removed)."""
    return await db_sync_to_async(_write)(turn, outcome, response, exc)


async def _shielded(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Await ``coroutine``, which runs to its end even if the caller is cancelled meanwhile.

    The caller still receives its ``CancelledError``; the log row and transcript are written
    regardless (the task is kept referenced until it is done).
    """
    task = asyncio.ensure_future(coroutine)
    _finishing.add(task)
    task.add_done_callback(_finishing.discard)
    return await asyncio.shield(task)


def _message_overflow(turn: _Turn) -> ContextOverflowError | None:
    """The overflow the turn's message alone causes on the chain's model, else ``None``.

    A lower bound of every prompt of the turn: advisors add to it (system text, history,
    retrieved context, tools), so a message that does not fit here fits no model call. The
    check proper runs before every model call (``core.context_window``); this one only lets a
    hopeless turn be refused before anything runs — and a stream before it opens (HTTP 400
    rather than a 200 event stream ending in ``error``).
    """
    if not turn.message:
        return None
    client = turn.compiled.client
    options = merge_options(client.default_options, turn.options)
    try:
        check_context_window(client.chat_model, Prompt(turn.message, options))
    except ContextOverflowError as exc:
        return exc
    return None


async def _refuse_overflowing_message(turn: _Turn) -> None:
    """Raise :class:`TurnError` ``context_overflow`` (400) when the message alone cannot fit
    the model's context window (:func:`_message_overflow`). The turn is finished as a failed
    one first: its call log is written, a conversation it started is removed again."""
    overflow = _message_overflow(turn)
    if overflow is None:
        return
    outcome = await _shielded(
        _finish(turn, _outcome(turn, CallLog.Status.ERROR, None), None, overflow)
    )
    raise TurnError(
        "context_overflow",
        str(overflow),
        http_status=400,
        trace_id=turn.trace_id,
        conversation_id=outcome.conversation_id,
    ) from overflow


def _turn_input(
    message: str | TurnInput | PreparedTurn,
    conversation_id: str | None,
    params: Mapping[str, Any] | None,
    label: str | None,
    version: int | str | None,
) -> TurnInput | PreparedTurn:
    if isinstance(message, (TurnInput, PreparedTurn)):
        if (conversation_id, params, label, version) != (None, None, None, None):
            raise TypeError(f"Pass a {type(message).__name__} alone, or its fields, not both.")
        return message
    return TurnInput(message, conversation_id, params, label, version)


async def _prepared(
    chain: str, user: Any, data: TurnInput | PreparedTurn, mode: str, trace_payloads: bool
) -> _Turn:
    """The turn of ``data``: prepared now (one thread hop), or by :func:`prepare_turn`."""
    if not isinstance(data, PreparedTurn):
        return await _prepare(chain, user, data, mode, trace_payloads)
    turn = data._turn
    if turn.mode != mode or turn.compiled.slug != chain or turn.user.pk != user.pk:
        raise ValueError("This turn was prepared for another chain, user or mode.")
    return turn


async def call_turn(
    chain: str,
    user: Any,
    message: str | TurnInput | PreparedTurn,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    version: int | str | None = None,
    trace_payloads: bool = False,
) -> TurnOutcome:
    """Run one turn through ``chain`` and return its outcome, the whole answer.

    The turn is ``message`` with the other fields, or a :class:`TurnInput` as a transport
    read it, or a :class:`PreparedTurn` (:func:`prepare_turn`). ``trace_payloads`` keeps
    every advisor's request and response in the trace (the admin playground shows them),
    whatever ``ADVISORS["TRACE_PAYLOAD_SAMPLE"]`` says.

    Raises :class:`~advisors_app.turn.events.TurnError` for refused input (nothing stored), and
    whatever the chain raised, unchanged, when it failed, with the turn's outcome as its
    ``turn_outcome`` attribute (``error_event(exc)`` gives the payload transports send, with
    the conversation — ``None`` when the failed turn started it — and the trace id); the call
    log is written in every case but refused input.
    """
    data = _turn_input(message, conversation_id, params, label, version)
    turn = await _prepared(chain, user, data, CallLog.Mode.CALL, trace_payloads)
    await _refuse_overflowing_message(turn)
    _running_turn_started()
    try:
        with turn.running():
            spec = await turn.spec().acall()
            response = await spec.achat_client_response()
    except asyncio.CancelledError:
        await _shielded(_finish(turn, _outcome(turn, CallLog.Status.CANCELLED, None), None))
        raise
    except Exception as exc:
        # The transports answer with the turn's conversation and trace id, as streams do.
        exc.turn_outcome = await _shielded(  # type: ignore[attr-defined]
            _finish(turn, _outcome(turn, CallLog.Status.ERROR, None), None, exc)
        )
        raise
    finally:
        _running_turn_ended()
    return await _shielded(_finish(turn, _outcome(turn, CallLog.Status.OK, response), response))


class TurnStream:
    """The events of one streamed turn: ``async for event in stream`` (see ``events``).

    ``conversation_id``, ``conversation_title``, ``trace_id`` and ``chain`` are known before
    the first event.
    Stopping early — ``await stream.aclose()`` or cancelling the task that iterates — closes
    the model stream at once, stores the partial turn and writes the call log; the
    ``done`` event with ``reason="cancelled"`` cannot be yielded then, so it is left in
    ``final_event`` for the transport to send. After the stream ends, ``final_event`` is the
    last event (``done`` or ``error``) and ``exception`` the error the chain raised, if any.
    The final event's ``conversation_id`` is ``None`` when the turn started a conversation
    and stored nothing (it was removed); ``conversation_id`` here keeps the id ``start`` named.
    """

    def __init__(self, turn: _Turn) -> None:
        self._turn = turn
        self.conversation_id = turn.conversation_id
        self.conversation_title = turn.title
        self.trace_id = turn.trace_id
        self.chain = turn.compiled.slug
        self.final_event: DoneEvent | ErrorEvent | None = None
        self.exception: BaseException | None = None
        self._started = False
        self._events = self._run()
        #: The turn's scope, entered around each step (one object: steps never overlap).
        self._scoped = turn.running()
        #: The task that iterated last (registered as running a turn).
        self._task: asyncio.Task[Any] | None = None

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> TurnEvent:
        # Per step: each step runs in the context of whichever task awaits it.
        task = asyncio.current_task()
        if task is not self._task:
            self._task = task
            _running_turn_started()
        with self._scoped:
            return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop the turn (a no-op once it ended)."""
        with self._turn.running():
            await self._events.aclose()
            if not self._started:
                # Closed before its first step: nothing ran, so end it here as a cancel would
                # (call log; the conversation it started, still empty, is removed).
                self._started = True
                outcome = _outcome(self._turn, CallLog.Status.CANCELLED, None)
                self.final_event = DoneEvent("cancelled", outcome)
                outcome = await _shielded(_finish(self._turn, outcome, None))
                self.final_event = DoneEvent("cancelled", outcome)

    async def __aenter__(self) -> TurnStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _run(self) -> AsyncIterator[TurnEvent]:
        self._started = True
        try:
            turn = self._turn
            yield StartEvent(self.conversation_id, self.chain, self.trace_id, turn.target.number)
            meter = turn.meter
            if meter is not None:
                for warning in meter.take_unsent_warnings():
                    yield BudgetWarningEvent(warning.to_dict())
            accumulator = ChatClientResponseAccumulator()
            first: float | None = None
            try:
                stream = turn.spec().stream().chat_client_responses()
                # Closed in reverse order: the tool-event reader stops reading ``chunks``
                # before ``chunks`` is closed.
                async with (
                    closing_stream(stream) as chunks,
                    closing_stream(_with_tool_events(turn, chunks)) as items,
                ):
                    async for item in items:
                        if meter is not None and meter.unsent_warnings:
                            # A model round passed a soft limit: said before what follows.
                            for warning in meter.take_unsent_warnings():
                                yield BudgetWarningEvent(warning.to_dict())
                        if not isinstance(item, ChatClientResponse):
                            yield item
                            continue
                        accumulator.add(item)
                        # The chunk's text (inline: this runs for every chunk).
                        chat = item.chat_response
                        text = (
                            chat.generations[0].output.text
                            if chat is not None and chat.generations
                            else ""
                        )
                        if text:
                            if first is None:
                                first = time.perf_counter() - turn.started
                                if turn.sources is None:
                                    turn.sources = _sources(item)
                                    if turn.sources is not None:
                                        yield SourcesEvent(turn.sources)
                            yield DeltaEvent(text)
            except (GeneratorExit, asyncio.CancelledError):
                partial = accumulator.result()
                outcome = _outcome(turn, CallLog.Status.CANCELLED, partial, first)
                # Kept should finishing be cancelled too; replaced once it is known what stayed.
                self.final_event = DoneEvent("cancelled", outcome)
                outcome = await _shielded(_finish(turn, outcome, partial))
                self.final_event = DoneEvent("cancelled", outcome)
                raise
            except Exception as exc:
                partial = accumulator.result()
                self.exception = exc
                self.final_event = error_event(
                    exc, conversation_id=self.conversation_id, trace_id=self.trace_id
                )
                outcome = _outcome(turn, CallLog.Status.ERROR, partial, first)
                outcome = await _shielded(_finish(turn, outcome, partial, exc))
                self.final_event = error_event(
                    exc, conversation_id=outcome.conversation_id, trace_id=self.trace_id
                )
                yield self.final_event
                return
            aggregated = accumulator.result()
            if turn.sources is None:
                turn.sources = _sources(aggregated)
                if turn.sources is not None:  # an answer without text still names its sources
                    yield SourcesEvent(turn.sources)
            outcome = _outcome(turn, CallLog.Status.OK, aggregated, first)
            outcome = await _shielded(_finish(turn, outcome, aggregated))
            if outcome.pending_approvals:
                yield ApprovalRequiredEvent(outcome.pending_approvals)
            done = DoneEvent("complete", outcome)
            self.final_event = done
            yield done
        finally:
            _running_turn_ended()


def _sources(chunk: ChatClientResponse) -> list[dict[str, Any]] | None:
    """The documents a chunk's retrieval found: in its context from the first chunk on (a
    stream's response metadata gets them only on its last chunk); ``[]`` when retrieval ran
    and found nothing, ``None`` when no retrieval ran."""
    found = cited_sources(chunk.context)
    chat = chunk.chat_response
    found = found or (cited_sources(chat.metadata) if chat is not None else [])
    ran = found or any(key in chunk.context for key in RETRIEVAL_KEYS)
    return found if ran else None


_END = object()


def _with_tool_events(
    turn: _Turn, chunks: AsyncIterator[ChatClientResponse]
) -> AsyncIterator[ChatClientResponse | TurnEvent]:
    """``chunks``, with the ``tool_call`` / ``tool_result`` events of the turn's tool rounds
    between them as they happen.

    A tool runs while the stream is between chunks, so for a chain with a tool loop the chunks
    are read by a task of their own and both arrive through one queue; for a chain without one
    this is ``chunks`` itself (no queue, no task, nothing per chunk).
    """
    if not turn.compiled.has_tool_loop:
        return chunks
    return _merged_tool_events(turn, chunks)


async def _merged_tool_events(
    turn: _Turn, chunks: AsyncIterator[ChatClientResponse]
) -> AsyncIterator[ChatClientResponse | TurnEvent]:
    queue: asyncio.Queue[Any] = asyncio.Queue()
    turn.tool_events = queue
    # The reader takes the next chunk only when the consumer asks for the next item, as
    # iterating ``chunks`` directly would: a consumer that stops after a chunk leaves the
    # model (and a memory advisor) exactly there, never a chunk further.
    wanted = asyncio.Event()

    async def pump() -> None:
        try:
            while True:
                await wanted.wait()
                wanted.clear()
                try:
                    chunk = await anext(chunks)
                except StopAsyncIteration:
                    break
                queue.put_nowait(chunk)
        finally:
            queue.put_nowait(_END)

    # Created in this step's context (the turn's user and scope), which the task keeps.
    task = asyncio.ensure_future(pump())
    try:
        wanted.set()
        while True:
            item = await queue.get()
            if item is _END:
                break
            yield item
            if isinstance(item, ChatClientResponse):  # the consumer asks for the next one
                wanted.set()
        await task  # raises what the stream raised
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait((task,))


async def stream_turn(
    chain: str,
    user: Any,
    message: str | TurnInput | PreparedTurn,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    version: int | str | None = None,
) -> TurnStream:
    """Validate a turn (``message`` with the other fields, a :class:`TurnInput`, or a
    :class:`PreparedTurn`) and return its :class:`TurnStream`; the chain runs while iterating.

    Raises :class:`~advisors_app.turn.events.TurnError` for refused input before anything is
    stored (so a REST view can still answer 400 instead of opening an event stream). Errors
    of the chain arrive as one ``error`` event, never as an exception.
    """
    data = _turn_input(message, conversation_id, params, label, version)
    turn = await _prepared(chain, user, data, CallLog.Mode.STREAM, False)
    await _refuse_overflowing_message(turn)
    return TurnStream(turn)
