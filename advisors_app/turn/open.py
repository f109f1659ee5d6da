"""Open a turn: everything it reads and checks before it runs, in one thread hop.

:func:`aopen_turn` checks what needs no database (:func:`~advisors_app.turn.input.checked_input`)
and then, in one thread hop (:func:`open_turn` is the same, blocking), runs the turn's first two
stages:

1. **choose** the version (:mod:`advisors_app.turn.choose`);
2. **open**: read, in one round trip (:func:`~advisors_app.db.prepared.rows_together`), the
   version (its chain is built once per process: :mod:`advisors_app.definition.runtime`), the
   caller's conversation with the version it started on (ids are namespaced per owner, so another
   user's id behaves as one never used) and the conversation's newest messages for the chain's
   memory (how many: :class:`WindowSizes`, the one place that decides); then check — a
   conversation started on another chain is refused (``conflict``, 409), a chain that pins its
   versions continues a conversation on the version it started on, the chain must build
   (``chain_misconfigured``, 500), the params must fit it (every field's errors at once:
   ``invalid``), a resume's decisions must fit the calls that wait
   (:func:`~advisors_app.approvals.pauses.open_resume`), the turn's budgets must allow its
   cheapest first call (``budget_exceeded``, 429), and the ``open`` hooks run (the caller's chat
   rate: ``throttled``, 429) — and only then write: a resume claims its calls, a new conversation
   is created recording its version, and the user's message is stored flagged pending
   (:meth:`~advisors_app.stores.memory.DjangoChatMemoryRepository.write_pending`, one statement:
   a process killed mid-turn leaves it, shown as interrupted; :mod:`advisors_app.turn.recovery`),
   which the turn's finish replaces.

Refusals are :class:`~advisors_app.exceptions.TurnError`: nothing is stored. The
:class:`~advisors_app.turn.state.Turn` returned carries its request context: the conversation
(``CONVERSATION_ID``), who the turn is for (``PRINCIPAL``, ``OWNER``), its trace id
(``TRACE_ID``), its meter, the params' context keys, and its
:class:`~advisors_app.core.memory.TurnMemory` (``TURN_MEMORY``) with the window read ahead: the
memory advisors read the conversation from it and hand it what they would store.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import transaction

from advisors_app.approvals.pauses import Resume, active_grants, claim, open_resume
from advisors_app.conf import app_settings
from advisors_app.core.attributes import (
    CONVERSATION_ID,
    OWNER,
    PRINCIPAL,
    TOOL_APPROVAL_GRANTS,
    TOOL_CALL_DECISIONS,
    TRACE_ID,
    TURN_MEMORY,
)
from advisors_app.core.memory import ReadAhead, TurnMemory
from advisors_app.core.metering import MODEL_CALL_METER
from advisors_app.core.prompt import ChatOptions, merge_options
from advisors_app.core.tracing import CallTrace
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
from advisors_app.exceptions import TurnError
from advisors_app.memory.conversations import (
    StoredConversation,
    conversation_key,
    conversation_title,
    create_conversation,
    create_conversation_with_message,
    turn_conversation_of,
    turn_conversation_read,
)
from advisors_app.models import PRODUCTION, CallLog, VersionPolicy
from advisors_app.stores.memory import DjangoChatMemoryRepository
from advisors_app.stores.scoped import user_tenant
from advisors_app.turn import stages
from advisors_app.turn.choose import choose_version, may_try_versions
from advisors_app.turn.events import budget_exceeded
from advisors_app.turn.input import TurnInput, checked_input
from advisors_app.turn.recovery import this_process
from advisors_app.turn.state import Assignment, Opening, StageTimes, Turn, VersionChoice
from advisors_app.validation import FieldErrors, schema_errors

__all__ = ["WindowSizes", "aopen_turn", "open_turn", "window_sizes"]

logger = logging.getLogger(__name__)
_repository = DjangoChatMemoryRepository()


class WindowSizes:
    """How many of a conversation's newest messages a turn reads ahead for its memory: the one
    place that decides it.

    The window is read in the round trip that reads the version, before the chain — which says
    how many its memory reads first (``CompiledChain.memory_read``) — is known. So the trip reads
    as many as the chain's memory needed on its last turn in this process (:meth:`planned`;
    :attr:`PREFETCH` for a chain not seen yet), and once the chain is built :meth:`needed` says
    what it needs; a turn reads again (same thread hop, one more round trip) only when that is
    more than was read: a chain republished with a larger window. A chain whose memory reads no
    window (no memory; session memory, which reads its own view) reads none.
    """

    #: Read ahead for a chain not seen yet: enough for the default windows
    #: (``MessageWindowChatMemory``'s 20 + 1, ``TokenWindowChatMemory``'s first 32).
    PREFETCH = 48

    def __init__(self) -> None:
        self.last: dict[str, int] = {}

    def planned(self, chain: str) -> int:
        """Messages to read with the version, before ``chain`` is built."""
        return self.last.get(chain, self.PREFETCH)

    def needed(self, chain: str, compiled: CompiledChain) -> int:
        """Messages ``compiled``'s memory reads first (0: none); remembered for the next turn."""
        needed = self.last[chain] = compiled.memory_read or 0
        return needed


#: The window sizes of this process's turns.
window_sizes = WindowSizes()


@dataclass(frozen=True, slots=True)
class _Read:
    """What the round trip read: the version, the caller's conversation, and the
    conversation's newest ``planned`` messages (``window``; ``None``: not read)."""

    target: ChainTarget
    stored: StoredConversation | None
    planned: int
    window: list[tuple[Any, ...]] | None


def _read(choice: VersionChoice, data: TurnInput, errors: FieldErrors) -> _Read:
    """The version, the caller's conversation and its window, in one round trip (the draft is
    read apart: it has no published row)."""
    chain, user, label, version = choice.chain, choice.user, choice.label, choice.version
    conversation_id = data.conversation_id
    reads = [] if version == DRAFT else [target_read(chain, label=label, version=version)]
    planned = 0
    if not errors and conversation_id is not None:
        reads.append(turn_conversation_read(user, conversation_id))
        planned = window_sizes.planned(chain)
        if planned:
            key = conversation_key(user, conversation_id)
            reads.append(_repository.window_read(key, planned))
    rows = iter(rows_together(*reads) if reads else ())
    target = _target(choice, None if version == DRAFT else next(rows))
    if errors or conversation_id is None:
        return _Read(target, None, 0, None)
    stored = turn_conversation_of(user, next(rows))
    return _Read(target, stored, planned, next(rows) if planned else None)


def _target(choice: VersionChoice, rows: list[tuple[Any, ...]] | None) -> ChainTarget:
    """The version chosen, from the rows read (``None``: the draft, read here)."""
    chain, label, version = choice.chain, choice.label, choice.version
    try:
        if rows is None:
            return resolve_target(chain, label=label, version=version)
        return target_of(chain, rows, label=label, version=version)
    except ChainNotFound:
        raise _chain_not_found(chain) from None
    except VersionNotFound as exc:
        if not may_try_versions(choice.user):
            # Whoever may not run drafts learns nothing of a chain nobody published: the same
            # answer as a slug that does not exist (the message tells staff how to publish).
            raise _chain_not_found(chain) from None
        field_name = "label" if label is not None or version is None else "version"
        raise TurnError(
            "version_not_found", str(exc), errors={field_name: [str(exc)]}, http_status=404
        ) from None


def _chain_not_found(chain: str) -> TurnError:
    message = f"No enabled chain {chain!r}."
    return TurnError("chain_not_found", message, errors={"chain": [message]}, http_status=404)


def _check_same_chain(
    chain: str, target: ChainTarget, stored: StoredConversation, key: str
) -> None:
    """Refuse a conversation that started on another chain (409 ``conflict``): its history,
    memory and version belong to that chain, and another chain continuing it would answer from
    a history it did not write (the JSON chain copied the plain chain's last reply)."""
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


def _pinned(target: ChainTarget, stored: StoredConversation) -> ChainTarget:
    """``target``, or the version the caller's conversation started on (when it is of this
    chain and the chain pins conversations)."""
    if (
        target.version_policy != VersionPolicy.PIN
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


def _compiled(choice: VersionChoice, target: ChainTarget, trace_id: str) -> CompiledChain:
    """The built chain; a chain that cannot be built is ``chain_misconfigured`` (500), which
    says why only to staff: the configuration is theirs, not the caller's business. The
    detail is logged with the trace id the caller is given."""
    chain = choice.chain
    try:
        return compiled_chain(target)
    except ChainConfigurationError as exc:
        if choice.version == DRAFT:  # only staff run drafts
            raise TurnError(
                "invalid",
                f"The draft of chain {chain!r} cannot run: {exc}",
                errors={"version": [f"The draft cannot run: {exc}"]},
            ) from exc
        logger.error("Chain %r cannot run (trace %s): %s", chain, trace_id, exc)
        detail = f": {exc}" if choice.user.is_staff else "; staff can find why by the trace id"
        raise TurnError(
            "chain_misconfigured",
            f"Chain {chain!r} cannot run (trace {trace_id}){detail}",
            http_status=500,
            trace_id=trace_id,
        ) from exc


def _params_errors(compiled: CompiledChain, params: Any) -> FieldErrors:
    if not isinstance(params, Mapping):
        return {"params": ["Enter a JSON object."]}
    if not params:
        # A copy: the caller adds to it.
        return {field: list(errs) for field, errs in compiled.empty_params_errors.items()}
    return schema_errors(compiled.params_schema, dict(params), "params")


def _meter(
    compiled: CompiledChain, user: Any, chain_id: int | None, message: str, params: Any
) -> TurnMeter:
    """The turn's meter, with the prices and the budgets that count it; raises
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


def _read_ahead(
    chain: str, stored: StoredConversation, compiled: CompiledChain, read: _Read
) -> ReadAhead | None:
    """The window the chain's memory reads first (``None``: it reads none), from the round
    trip — or read again, when that read fewer messages than the chain needs."""
    needed = window_sizes.needed(chain, compiled)
    if not needed:
        return None
    if read.window is not None and read.planned >= needed:
        return _repository.read_ahead(read.window, stored.last_sequence, read.planned)
    return _repository.read_window(stored.pk, stored.last_sequence, needed)


def _keeps_payloads(asked: bool) -> bool:
    """Whether this turn's trace keeps every advisor's request and response: when asked (the
    playground), in ``DEBUG``, and for ``ADVISORS["TRACE_PAYLOAD_SAMPLE"]`` of the other turns.
    The rest keep times and status only, which costs a fraction per streamed chunk."""
    if asked or settings.DEBUG:
        return True
    share = app_settings.TRACE_PAYLOAD_SAMPLE
    return share > 0 and random.random() < share


def _continued(chain: str, user: Any, data: TurnInput, read: _Read) -> ChainTarget:
    """The version chosen, checked against the caller's conversation: one of another chain is
    refused, and one of a chain that pins versions continues on the version it started on."""
    target, stored = read.target, read.stored
    if stored is None:
        return target
    _check_same_chain(chain, target, stored, conversation_key(user, data.conversation_id))
    # Naming ``production`` is what everyone may name: the same as naming nothing.
    if data.version is None and data.label in (None, PRODUCTION):
        return _pinned(target, stored)
    return target


def _conversation(
    chain: str,
    user: Any,
    data: TurnInput,
    target: ChainTarget,
    compiled: CompiledChain,
    read: _Read,
    owner: str,
) -> tuple[str, str, bool, str, ReadAhead | None, int | None]:
    """``(key, public id, created, title, read-ahead, pending message)`` of the turn's
    conversation: created now when new, recording its version (holding nothing yet; one a
    concurrent request created meanwhile is read as it is), else the one read, with the window
    its memory reads first. The user's message is stored pending (``None``: a resume, which
    carries none): a process killed mid-turn leaves it, and the turn's finish replaces it —
    in the statement that creates a conversation with a server-made id."""
    stored = read.stored
    message = None if data.resumes else data.message
    if stored is None and data.conversation_id is None and message is not None:
        key, public, pending = create_conversation_with_message(
            user,
            title=data.message,
            chain_version_id=target.version_id,
            text=message,
            owner=owner,
        )
        return key, public, True, conversation_title(data.message), ReadAhead(), pending
    if stored is None:
        key, public, created, title = create_conversation(
            user, data.conversation_id, title=data.message, chain_version_id=target.version_id
        )
        ahead = ReadAhead() if created else None
    else:
        # Read only when the caller named it: ``data.conversation_id`` is its (checked) id.
        key, public = conversation_key(user, data.conversation_id), data.conversation_id
        created, title = False, stored.title
        ahead = _read_ahead(chain, stored, compiled, read)
    pending = None if message is None else _repository.write_pending(key, message, owner)
    return key, public, created, title, ahead, pending


def _context(
    user: Any,
    params: Mapping[str, Any],
    key: str,
    trace_id: str,
    meter: TurnMeter,
    memory: TurnMemory,
    granted: list[str],
    resume: Resume | None,
) -> dict[str, Any]:
    """The request context the chain runs with."""
    context = {k: v for k, v in params.items() if k not in ("options", "system_params")}
    context[CONVERSATION_ID] = key
    # Who the turn is for, for the stores (retrieval scoped to the caller's documents) ...
    context[PRINCIPAL] = user
    # ... and as a key of per-user state (the semantic cache).
    context[OWNER] = f"user:{user.pk}"
    context[TRACE_ID] = trace_id
    context[MODEL_CALL_METER] = meter
    context[TURN_MEMORY] = memory
    if granted:
        context[TOOL_APPROVAL_GRANTS] = tuple(granted)
    if resume is not None:
        context[TOOL_CALL_DECISIONS] = resume.decisions
    return context


def _open(
    chain: str, user: Any, data: TurnInput, errors: FieldErrors, trace_payloads: bool
) -> Turn:
    # Known before the chain runs: whoever stores the reply writes it into its metadata.
    trace_id = uuid.uuid4().hex
    times = StageTimes()
    choice = choose_version(chain, user, data, times)
    started = time.perf_counter()
    read = _read(choice, data, errors)
    target = _continued(chain, user, data, read)
    if not errors:
        assignment = Assignment(chain, user, data, read.target, target, read.stored)
        target = stages.assign(assignment)
    stored = read.stored
    compiled = _compiled(choice, target, trace_id)
    params = {} if data.params is None else data.params
    errors.update(_params_errors(compiled, params))
    if errors:
        raise TurnError("invalid", "The request is invalid.", errors=errors)
    granted = active_grants(stored.pk) if compiled.may_pause and stored is not None else []
    if data.resumes:
        decisions = data.resume_decisions()
        pending = open_resume(user, stored.pk if stored else None, decisions, compiled, granted)
    meter = _meter(compiled, user, target.chain_id, data.message, params)
    stages.run_hooks(stages.Stage.OPEN, Opening(chain, user, data, target, compiled, stored))
    # Checked: only now does the turn write.
    resume = None
    if data.resumes:
        with transaction.atomic():
            resume = claim(user, pending, decisions)
        granted = [*granted, *resume.granted]
    owner = this_process()
    key, public, created, title, ahead, pending = _conversation(
        chain, user, data, target, compiled, read, owner
    )
    meter.booked.turn, meter.booked.owner = trace_id, owner
    memory = TurnMemory(key, ahead)
    turn = Turn(
        compiled,
        target,
        user,
        data.message,
        key,
        public,
        _context(user, params, key, trace_id, meter, memory, granted, resume),
        ChatOptions.from_dict(params["options"]) if params.get("options") else None,
        _system(compiled, params),
        trace_id,
        CallTrace(capture_payloads=_keeps_payloads(trace_payloads)),
        memory,
        meter,
        times,
        new_conversation=created,
        title=title,
        resume=resume,
        pending_message=pending,
    )
    times.add(stages.Stage.OPEN, started)
    return turn


def _system(compiled: CompiledChain, params: Mapping[str, Any]) -> str | None:
    """The system text of a chain whose template has placeholders (``None``: the chain's)."""
    if compiled.system_template is None:
        return None
    return compiled.system_template.render(params["system_params"])


def open_turn(chain: str, user: Any, data: TurnInput, *, trace_payloads: bool = False) -> Turn:
    """Blocking: check, choose and open the turn of ``data`` (see the module docstring).
    Raises :class:`~advisors_app.exceptions.TurnError`."""
    return _open(chain, user, data, checked_input(user, data), trace_payloads)


async def aopen_turn(
    chain: str, user: Any, data: TurnInput, *, trace_payloads: bool = False
) -> Turn:
    """:func:`open_turn` in one thread hop, after the checks that need no database (input
    refused by those costs no hop)."""
    errors = checked_input(user, data)
    return await db_sync_to_async(_open)(chain, user, data, errors, trace_payloads)
