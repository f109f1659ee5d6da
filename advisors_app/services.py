"""Run one chat turn through a stored chain: the one service every transport calls.

The admin playground, the REST views (``call`` and SSE ``stream``) and the websocket consumer
all go through :func:`call_turn` or :func:`stream_turn`. Both take the same input — chain slug,
user, message text, optional conversation id, optional params, optional ``label`` or
``version`` — and:

1. validate it before anything runs: a blank or oversized message, a malformed conversation
   id, an unknown or disabled chain, a label or version that does not exist or (for anyone
   but staff) is not ``production``, params the chain does not accept, then — valid input
   only — the user's chat rate (:mod:`advisors_app.throttling`) →
   :class:`TurnError` with field errors (REST: HTTP ``error.http_status``; websocket: an
   ``error`` frame from ``error.to_event()``); nothing is stored;
2. in one thread hop (``_open``): choose the chain version (:mod:`advisors_app.runtime`): the
   label's, or the one the conversation started on when the chain pins conversations; read
   the user's conversation (:mod:`advisors_app.conversations`: ids are namespaced per owner,
   so another user's id behaves as one never used), count the rate, create the conversation
   recording that version when new, and read the window a memory advisor will need into the
   turn's :class:`~advisors_app.stores.memory.TurnScope`;
3. run the chain (call) or yield :mod:`stream events <advisors_app.events>`, recording the
   per-advisor trace (``core.tracing.CallTrace``, plus OpenTelemetry spans); the turn's trace
   id is in the request context (``core.attributes.TRACE_ID``) from the start; the memory
   advisor's reads of the conversation are answered from the scope and its append is held
   there;
4. in one thread hop and one transaction (``_write``): the turn's messages — the memory
   advisor's held append when the chain has one; otherwise the service's (an interrupted
   reply flagged as the memory advisors flag it: ``metadata["interrupted"]`` and
   ``["finish_reason"]``; nothing when no text came) — and one
   :class:`~advisors_app.models.CallLog` row, with the version and label, for completed,
   failed and cancelled turns alike (cancellations shielded so the row is written even while
   being cancelled; should the messages fail, the row is written alone). Whoever stores the
   reply writes the trace id into its ``metadata["trace_id"]`` from the context, so concurrent
   turns of one conversation each keep their own, and the repository hands the stored
   reply's id back (``message_id``, no query to find it). A conversation the turn started is
   removed in the same transaction if it stored nothing: the answer says
   ``conversation_id: None, stored: False`` then.

A later turn of a chain with a memory advisor costs two thread hops and six SQL statements in
one commit: version, conversation, window; sequence numbers, messages, call log.

Params (JSON object): ``options`` (the per-request chat options: ``temperature``,
``max_tokens``, ``top_p``, ``top_k``, ``stop``, ``seed``, penalties), ``system_params`` (values
for the chain's system-template placeholders), and the context params the chain's advisor types
declare (for example ``qa_filter_expression``). Anything else is refused. All database work
runs off the event loop (``sync_to_async``).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import transaction

from advisors_app.conf import app_settings
from advisors_app.conversations import (
    StoredConversation,
    conversation_id_errors,
    conversation_key,
    create_conversation,
    discard_if_empty,
    find_turn_conversation,
)
from advisors_app.core.aggregation import ChatClientResponseAccumulator
from advisors_app.core.attributes import CONVERSATION_ID, OWNER, TRACE_ID, TRACE_ID_METADATA
from advisors_app.core.client import ChatClientRequestSpec
from advisors_app.core.exceptions import ProviderError
from advisors_app.core.mappings import merged
from advisors_app.core.memory import CANCELLED, ERROR, FINISH_REASON, INTERRUPTED
from advisors_app.core.messages import AssistantMessage, UserMessage
from advisors_app.core.prompt import ChatOptions
from advisors_app.core.requests import ChatClientResponse
from advisors_app.core.serialization import to_jsonable
from advisors_app.core.streams import closing_stream
from advisors_app.core.tracing import CallTrace, CompositeObserver, OpenTelemetryObserver
from advisors_app.events import (
    DeltaEvent,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    TurnError,
    TurnEvent,
    error_event,
)
from advisors_app.models import PRODUCTION, CallLog, VersionPolicy
from advisors_app.models.versions import LABEL_NAME_VALIDATOR
from advisors_app.runtime import (
    DRAFT,
    ChainConfigurationError,
    ChainNotFound,
    ChainTarget,
    CompiledChain,
    VersionNotFound,
    compiled_chain,
    resolve_target,
)
from advisors_app.scoping import acting_for
from advisors_app.stores.memory import DjangoChatMemoryRepository, TurnScope
from advisors_app.throttling import chat_turn_wait
from advisors_app.validation import FieldErrors, schema_errors, text_problem

__all__ = ["TurnResult", "TurnStream", "call_turn", "stop_running_turns", "stream_turn"]

_T = TypeVar("_T")
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
    ``timeout`` seconds. For a server shutting down (see :mod:`advisors_app.server_shutdown`).
    """
    running = [task for task in _running if not task.done()]
    for task in running:
        task.cancel()
    if running:
        await asyncio.wait(running, timeout=timeout)
    if _finishing:
        await asyncio.wait(list(_finishing), timeout=timeout)


@dataclass(frozen=True)
class TurnResult:
    """A completed call: the answer plus what the playground shows.

    ``to_dict()`` is the REST ``call`` body: ``{"conversation_id", "message_id", "stored",
    "content", "usage", "metadata", "finish_reason", "trace_id", "version"}``.
    ``message_id`` is the stored reply's id (``None`` when nothing was stored); a turn that
    started a conversation and stored nothing (a guard refused the message) has
    ``conversation_id=None``: the conversation was removed. ``prompt`` (the messages and
    options of the last request sent to the model, texts uncut) and ``trace``
    (``CallTrace.to_dict()``) are for operators, not end users.
    """

    conversation_id: str | None
    content: str
    usage: dict[str, Any] | None
    metadata: dict[str, Any]
    finish_reason: str | None
    trace_id: str
    chain: str
    #: The number of the chain version that ran (``None``: the draft).
    version: int | None = None
    #: The stored reply's id (``ChatMessage`` primary key); ``None``: nothing was stored.
    message_id: int | None = None
    #: Whether the turn's messages were stored.
    stored: bool = False
    prompt: dict[str, Any] | None = field(default=None, repr=False)
    trace: dict[str, Any] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "message_id": self.message_id,
            "stored": self.stored,
            "content": self.content,
            "usage": self.usage,
            "metadata": self.metadata,
            "finish_reason": self.finish_reason,
            "trace_id": self.trace_id,
            "version": self.version,
        }


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
    final_prompt: dict[str, Any] | None = None
    started: float = field(default_factory=time.perf_counter)
    #: Whether this turn created the conversation (removed again if the turn stores nothing).
    new_conversation: bool = False

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Enter the turn's user and conversation scope (around each step of the turn)."""
        with acting_for(self.user), _repository.scoped(self.scope):
            yield

    def spec(self) -> ChatClientRequestSpec:
        spec = self.compiled.client.prompt(self.message).advisor_params(self.context)
        if self.system is not None:
            spec = spec.system(self.system)
        if self.options is not None:
            spec = spec.options(self.options)
        return spec.observer(CompositeObserver(_telemetry, self.trace, _PromptRecorder(self)))


@dataclass(frozen=True, slots=True)
class _Stored:
    """What a finished turn left in the conversation."""

    #: The stored reply's id; ``None``: the turn stored nothing.
    message_id: int | None
    #: The public conversation id; ``None`` when the turn's new conversation was removed.
    conversation_id: str | None

    @property
    def stored(self) -> bool:
        return self.message_id is not None


class _PromptRecorder:
    """Keeps the (uncut) prompt of the last request that reached the model."""

    def __init__(self, turn: _Turn) -> None:
        self._turn = turn

    def _record(self, advisor: Any, request: Any) -> None:
        if getattr(advisor, "is_model_advisor", False):
            prompt = request.prompt
            self._turn.final_prompt = {
                "messages": [m.to_dict() for m in prompt.instructions],
                "options": prompt.options.to_dict() if prompt.options is not None else None,
            }

    def observe_call(self, advisor: Any, request: Any, proceed: Any) -> Any:
        self._record(advisor, request)
        return proceed(request)

    def observe_stream(self, advisor: Any, request: Any, proceed: Any) -> Any:
        self._record(advisor, request)
        return proceed(request)


def _user_errors(user: Any) -> TurnError | None:
    if user is None or not getattr(user, "is_authenticated", False):
        return TurnError("not_authenticated", "Authentication is required.", http_status=401)
    return None


def _message_errors(message: Any) -> FieldErrors:
    if not isinstance(message, str):
        return {"message": ["Not a valid string."]}
    if not message.strip():
        return {"message": ["This field may not be blank."]}
    problem = text_problem(message)
    if problem:
        return {"message": [problem]}
    limit = app_settings.MAX_MESSAGE_CHARS
    if len(message) > limit:
        return {
            "message": [
                f"Ensure this field has no more than {limit} characters (it has {len(message)})."
            ]
        }
    return {}


def _params_errors(compiled: CompiledChain, params: Any) -> FieldErrors:
    if not isinstance(params, Mapping):
        return {"params": ["Enter a JSON object."]}
    return schema_errors(compiled.params_schema, dict(params), "params")


def _target_errors(label: Any, version: Any) -> FieldErrors:
    errors: FieldErrors = {}
    if label is not None and version is not None:
        errors["version"] = ["Send a label or a version, not both."]
    if label is not None and not (
        isinstance(label, str) and LABEL_NAME_VALIDATOR.regex.match(label)
    ):
        errors["label"] = [str(LABEL_NAME_VALIDATOR.message)]
    if version not in (None, DRAFT) and (
        isinstance(version, bool) or not isinstance(version, int) or version < 1
    ):
        errors["version"] = ['Enter a version number (1, 2, ...) or "draft".']
    return errors


def _check_target_permission(user: Any, label: str | None, version: int | str | None) -> None:
    """Anything but the ``production`` label is for staff: drafts and other versions are
    for trying out, not for end users."""
    if (version is not None or label not in (None, PRODUCTION)) and not user.is_staff:
        raise TurnError(
            "permission_denied",
            "Only staff may choose a chain version or label other than production.",
            http_status=403,
        )


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
    chain: str, label: str | None, version: int | str | None, target: ChainTarget
) -> CompiledChain:
    try:
        return compiled_chain(target)
    except ChainConfigurationError as exc:
        if version == DRAFT:
            raise TurnError(
                "invalid",
                f"The draft of chain {chain!r} cannot run: {exc}",
                errors={"version": [f"The draft cannot run: {exc}"]},
            ) from exc
        raise TurnError(
            "chain_misconfigured",
            f"Chain {chain!r} cannot run: {exc}",
            http_status=500,
        ) from exc


def _target(chain: str, label: str | None, version: int | str | None) -> ChainTarget:
    try:
        return resolve_target(chain, label=label, version=version)
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


@dataclass(frozen=True, slots=True)
class _Opened:
    """What :func:`_open` read: the version to run, the conversation and its window."""

    target: ChainTarget
    compiled: CompiledChain
    params: Mapping[str, Any]
    key: str
    public: str
    created: bool
    scope: TurnScope


def _open(
    chain: str,
    user: Any,
    message: str,
    conversation_id: str | None,
    params: Any,
    errors: FieldErrors,
    label: str | None,
    version: int | str | None,
) -> _Opened:
    """Everything a turn reads before it runs, in one thread hop (blocking): the version
    (one query, none more when its chain is built already), the caller's conversation with
    the version it started on (one query), the rate, the conversation created when new, and
    the window a memory advisor will read (one query). Raises :class:`TurnError`."""
    target = _target(chain, label, version)
    stored = None
    if not errors and conversation_id is not None:
        stored = find_turn_conversation(user, conversation_id)
        if label is None and version is None:
            target = _pinned(target, stored)
    compiled = _compiled(chain, label, version, target)
    params = {} if params is None else params
    errors.update(_params_errors(compiled, params))
    if errors:
        raise TurnError("invalid", "The request is invalid.", errors=errors)
    # Counted only now that the input is valid: refused requests never use up the rate.
    wait = chat_turn_wait(user)
    if wait is not None:
        raise TurnError(
            "throttled",
            f"Too many messages: try again in {math.ceil(wait)} s.",
            http_status=429,
            retry_after=wait,
        )
    if stored is None:
        key, public, created = create_conversation(
            user, conversation_id, title=message, chain_version_id=target.version_id
        )
        scope = _repository.open_turn(key, conversation_pk=None, last_sequence=0)
        if not created:  # made by a concurrent request meanwhile: read it as it is
            scope = TurnScope(key)
    else:
        public = conversation_id or ""
        key, created = conversation_key(user, public), False
        scope = (
            _repository.open_turn(
                key, conversation_pk=stored.pk, last_sequence=stored.last_sequence
            )
            if compiled.has_memory
            else TurnScope(key)
        )
    return _Opened(target, compiled, params, key, public, created, scope)


async def _prepare(
    chain: str,
    user: Any,
    message: Any,
    conversation_id: Any,
    params: Any,
    mode: str,
    label: Any = None,
    version: Any = None,
    trace_payloads: bool = False,
) -> _Turn:
    refused = _user_errors(user)
    if refused is not None:
        raise refused
    errors = _message_errors(message)
    errors.update(conversation_id_errors(conversation_id))
    target_errors = _target_errors(label, version)
    if target_errors:
        raise TurnError("invalid", "The request is invalid.", errors={**errors, **target_errors})
    _check_target_permission(user, label, version)
    opened = await sync_to_async(_open)(
        chain, user, message, conversation_id, params, errors, label, version
    )
    compiled, params = opened.compiled, opened.params
    context = {k: v for k, v in params.items() if k not in ("options", "system_params")}
    options = ChatOptions.from_dict(params["options"]) if params.get("options") else None
    system = None
    if compiled.system_template is not None:
        system = compiled.system_template.render(params["system_params"])
    context[CONVERSATION_ID] = opened.key
    # Scopes per-user state (the semantic cache) to the caller.
    context[OWNER] = f"user:{user.pk}"
    # Known before the chain runs: whoever stores the reply writes it into its metadata.
    trace_id = context[TRACE_ID] = uuid.uuid4().hex
    return _Turn(
        compiled,
        opened.target,
        user,
        message,
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
    )


def _keeps_payloads(asked: bool) -> bool:
    """Whether this turn's trace keeps every advisor's request and response: when asked (the
    playground), in ``DEBUG``, and for ``ADVISORS["TRACE_PAYLOAD_SAMPLE"]`` of the other turns.
    The rest keep times and status only, which costs a fraction per streamed chunk."""
    if asked or settings.DEBUG:
        return True
    share = app_settings.TRACE_PAYLOAD_SAMPLE
    return share > 0 and random.random() < share


def _reply_text(response: ChatClientResponse | None) -> str:
    chat = response.chat_response if response is not None else None
    return chat.result.output.text if chat is not None and chat.result is not None else ""


def _outcome(
    response: ChatClientResponse | None,
) -> tuple[dict[str, Any] | None, dict[str, Any], str | None]:
    """``(usage, metadata, finish_reason)`` of a response, JSON-compatible."""
    chat = response.chat_response if response is not None else None
    if chat is None:
        return None, {}, None
    usage = chat.metadata.usage.to_dict() if chat.metadata.usage is not None else None
    finish = chat.result.metadata.finish_reason if chat.result is not None else None
    return usage, to_jsonable(dict(chat.metadata.extra)), finish


def _persist(turn: _Turn, response: ChatClientResponse | None, reason: str | None) -> None:
    """Hold the turn in its scope unless a memory advisor owns that (it held its own append).

    ``reason`` is ``None`` for a completed turn, else ``CANCELLED``/``ERROR``: the partial
    reply is flagged as the memory advisors flag it, and nothing is stored without text. The
    reply carries the turn's trace id, as a memory advisor's does.
    """
    if turn.compiled.has_memory:
        return
    text = _reply_text(response)
    traced = {TRACE_ID_METADATA: turn.trace_id}
    if reason is None:
        chat = response.chat_response if response is not None else None
        if chat is None or chat.result is None:
            return
        output = chat.result.output
        reply = replace(output, metadata=merged(output.metadata, traced))
    elif text.strip():
        reply = AssistantMessage(text, {INTERRUPTED: True, FINISH_REASON: reason, **traced})
    else:
        return
    turn.scope.pending.append(([UserMessage(turn.message), reply], False))


def _call_log(
    turn: _Turn,
    status: str,
    response: ChatClientResponse | None,
    exc: BaseException | None,
    time_to_first_token: float | None,
) -> CallLog:
    usage, _, finish_reason = _outcome(response)
    return CallLog(
        chain_id=turn.target.chain_id,
        chain_slug=turn.compiled.slug,
        config_hash=turn.compiled.snapshot_hash,
        chain_version_id=turn.target.version_id,
        label=turn.target.label,
        user_id=turn.user.pk,
        conversation_id=turn.conversation_key,
        trace_id=turn.trace_id,
        mode=turn.mode,
        status=status,
        latency=time.perf_counter() - turn.started,
        time_to_first_token=time_to_first_token,
        usage=usage or {},
        finish_reason=finish_reason or "",
        error_type=type(exc).__name__ if exc is not None else "",
        error_message=str(exc)[:2000] if exc is not None else "",
        provider_status=exc.status if isinstance(exc, ProviderError) else None,
        trace=turn.trace.to_dict(),
    )


def _write(
    turn: _Turn,
    status: str,
    response: ChatClientResponse | None,
    exc: BaseException | None,
    time_to_first_token: float | None,
) -> _Stored:
    """Blocking: one transaction with the turn's messages and its call log row. Should the
    messages fail to be written, the call log is still written, alone, and the error raised."""
    reason = {CallLog.Status.OK: None, CallLog.Status.CANCELLED: CANCELLED}.get(status, ERROR)
    log = _call_log(turn, status, response, exc, time_to_first_token)
    try:
        with transaction.atomic():
            _persist(turn, response, reason)
            _repository.write_turn(turn.scope)
            message_id = _repository.take_reply_id(turn.trace_id)
            log.save(force_insert=True)
            removed = (
                turn.new_conversation
                and message_id is None
                and discard_if_empty(turn.conversation_key)
            )
    except Exception:
        log.pk = None
        log.save(force_insert=True)
        raise
    return _Stored(message_id, None if removed else turn.conversation_id)


async def _finish(
    turn: _Turn,
    status: str,
    response: ChatClientResponse | None,
    exc: BaseException | None = None,
    time_to_first_token: float | None = None,
) -> _Stored:
    """Persist the turn (see :func:`_persist`; a memory advisor's append is held in the
    turn's scope), write its call log row — one transaction, one thread hop — and say what it
    left stored: the reply's id and the conversation, or ``None`` for one the turn started and
    left empty (removed)."""
    return await sync_to_async(_write)(turn, status, response, exc, time_to_first_token)


async def _shielded(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """Await ``coroutine``, which runs to its end even if the caller is cancelled meanwhile.

    The caller still receives its ``CancelledError``; the log row and transcript are written
    regardless (the task is kept referenced until it is done).
    """
    task = asyncio.ensure_future(coroutine)
    _finishing.add(task)
    task.add_done_callback(_finishing.discard)
    return await asyncio.shield(task)


async def call_turn(
    chain: str,
    user: Any,
    message: str,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    version: int | str | None = None,
    trace_payloads: bool = False,
) -> TurnResult:
    """Run one turn through ``chain`` and return the whole answer.

    ``trace_payloads`` keeps every advisor's request and response in the trace (the admin
    playground shows them), whatever ``ADVISORS["TRACE_PAYLOAD_SAMPLE"]`` says.

    Raises :class:`~advisors_app.events.TurnError` for refused input (nothing stored), and
    whatever the chain raised, unchanged, when it failed (``error_event(exc)`` gives the
    payload transports send); the call log is written in every case but refused input.
    """
    turn = await _prepare(
        chain,
        user,
        message,
        conversation_id,
        params,
        CallLog.Mode.CALL,
        label,
        version,
        trace_payloads,
    )
    _running_turn_started()
    try:
        with turn.running():
            spec = await turn.spec().acall()
            response = await spec.achat_client_response()
    except asyncio.CancelledError:
        await _shielded(_finish(turn, CallLog.Status.CANCELLED, None))
        raise
    except Exception as exc:
        await _shielded(_finish(turn, CallLog.Status.ERROR, None, exc))
        raise
    finally:
        _running_turn_ended()
    stored = await _shielded(_finish(turn, CallLog.Status.OK, response))
    usage, metadata, finish_reason = _outcome(response)
    return TurnResult(
        conversation_id=stored.conversation_id,
        content=_content(response),
        usage=usage,
        metadata=metadata,
        finish_reason=finish_reason,
        trace_id=turn.trace_id,
        chain=turn.compiled.slug,
        version=turn.target.number,
        message_id=stored.message_id,
        stored=stored.stored,
        prompt=turn.final_prompt,
        trace=turn.trace.to_dict(),
    )


def _content(response: ChatClientResponse | None) -> str:
    chat = response.chat_response if response is not None else None
    return chat.text if chat is not None else ""


class TurnStream:
    """The events of one streamed turn: ``async for event in stream`` (see ``events``).

    ``conversation_id``, ``trace_id`` and ``chain`` are known before the first event.
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
        self.trace_id = turn.trace_id
        self.chain = turn.compiled.slug
        self.final_event: DoneEvent | ErrorEvent | None = None
        self.exception: BaseException | None = None
        self._started = False
        self._events = self._run()

    def __aiter__(self) -> TurnStream:
        return self

    async def __anext__(self) -> TurnEvent:
        # Set per step: each step runs in the context of whichever task awaits it.
        _running_turn_started()
        with self._turn.running():
            return await self._events.__anext__()

    async def aclose(self) -> None:
        """Stop the turn (a no-op once it ended)."""
        with self._turn.running():
            await self._events.aclose()
            if not self._started:
                # Closed before its first step: nothing ran, so end it here as a cancel would
                # (call log; the conversation it started, still empty, is removed).
                self._started = True
                self.final_event = self._done(None, "cancelled", None)
                stored = await _shielded(_finish(self._turn, CallLog.Status.CANCELLED, None))
                self.final_event = self._done(None, "cancelled", stored)

    async def __aenter__(self) -> TurnStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def _done(
        self, response: ChatClientResponse | None, reason: str, stored: _Stored | None
    ) -> DoneEvent:
        """The ``done`` event; ``stored=None``: what the turn stored is not known (yet)."""
        usage, metadata, finish_reason = _outcome(response)
        return DoneEvent(
            reason,
            self.conversation_id if stored is None else stored.conversation_id,
            _content(response),
            usage,
            metadata,
            finish_reason,
            self.trace_id,
            message_id=stored.message_id if stored is not None else None,
            stored=stored is not None and stored.stored,
        )

    async def _run(self) -> AsyncIterator[TurnEvent]:
        self._started = True
        try:
            turn = self._turn
            yield StartEvent(self.conversation_id, self.chain, self.trace_id, turn.target.number)
            accumulator = ChatClientResponseAccumulator()
            first: float | None = None
            try:
                async with closing_stream(turn.spec().stream().chat_client_responses()) as chunks:
                    async for chunk in chunks:
                        accumulator.add(chunk)
                        text = _delta(chunk)
                        if text:
                            if first is None:
                                first = time.perf_counter() - turn.started
                            yield DeltaEvent(text)
            except (GeneratorExit, asyncio.CancelledError):
                partial = accumulator.result()
                # Kept should finishing be cancelled too; replaced once it is known what stayed.
                self.final_event = self._done(partial, "cancelled", None)
                stored = await _shielded(
                    _finish(turn, CallLog.Status.CANCELLED, partial, None, first)
                )
                self.final_event = self._done(partial, "cancelled", stored)
                raise
            except Exception as exc:
                partial = accumulator.result()
                self.exception = exc
                self.final_event = error_event(
                    exc, conversation_id=self.conversation_id, trace_id=self.trace_id
                )
                stored = await _shielded(_finish(turn, CallLog.Status.ERROR, partial, exc, first))
                self.final_event = error_event(
                    exc, conversation_id=stored.conversation_id, trace_id=self.trace_id
                )
                yield self.final_event
                return
            aggregated = accumulator.result()
            stored = await _shielded(_finish(turn, CallLog.Status.OK, aggregated, None, first))
            done = self._done(aggregated, "complete", stored)
            self.final_event = done
            yield done
        finally:
            _running_turn_ended()


def _delta(chunk: ChatClientResponse) -> str:
    chat = chunk.chat_response
    if chat is None or not chat.generations:
        return ""
    return chat.generations[0].output.text


async def stream_turn(
    chain: str,
    user: Any,
    message: str,
    conversation_id: str | None = None,
    params: Mapping[str, Any] | None = None,
    *,
    label: str | None = None,
    version: int | str | None = None,
) -> TurnStream:
    """Validate a turn and return its :class:`TurnStream`; the chain runs while iterating.

    Raises :class:`~advisors_app.events.TurnError` for refused input before anything is
    stored (so a REST view can still answer 400 instead of opening an event stream). Errors
    of the chain arrive as one ``error`` event, never as an exception.
    """
    turn = await _prepare(
        chain, user, message, conversation_id, params, CallLog.Mode.STREAM, label, version
    )
    return TurnStream(turn)
