"""What one turn carries from stage to stage: the values the stages and their hooks are handed.

* :class:`VersionChoice` — the ``choose`` stage's: which version the caller asked for;
* :class:`Assignment` — the ``assign`` stage's: the version read, and the caller's conversation;
* :class:`Opening` — the ``open`` stage's: the turn read and checked, nothing written yet;
* :class:`Turn` — the turn opened and ready to run, then running (``run``);
* :class:`Finished` — the ``finish`` and ``after_commit`` stages': what the turn left stored;
* :class:`StageTimes` — how long each stage took, for the trace.

See :mod:`advisors_app.turn.stages` for the hooks and :mod:`advisors_app.turn` for the order.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from advisors_app.core.client import ChatClientRequestSpec
from advisors_app.core.memory import TurnMemory
from advisors_app.core.prompt import ChatOptions
from advisors_app.core.tracing import CallTrace
from advisors_app.models import CallLog
from advisors_app.turn.sources import TurnSources

if TYPE_CHECKING:
    from advisors_app.approvals.pauses import Resume
    from advisors_app.costs.metering import TurnMeter
    from advisors_app.definition.runtime import ChainTarget, CompiledChain
    from advisors_app.memory.conversations import StoredConversation
    from advisors_app.turn.input import TurnInput
    from advisors_app.turn.outcome import TurnOutcome

__all__ = ["Assignment", "Finished", "Opening", "StageTimes", "Turn", "VersionChoice"]


class StageTimes:
    """Seconds each stage of a turn took, in the order they ran: the trace's ``"stages"``."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def add(self, stage: str, started: float) -> None:
        """Record ``stage`` as having run from ``started`` (``time.perf_counter()``) to now."""
        self.seconds[stage] = round(time.perf_counter() - started, 6)


@dataclass(frozen=True, slots=True)
class VersionChoice:
    """Which version of ``chain`` a turn runs, as asked: a ``label`` or a ``version`` (a
    number, or ``"draft"``); neither: ``production``. ``conversation_id`` is the caller's
    (public) conversation, ``None`` for a new one. A ``choose`` hook returns it changed with
    ``dataclasses.replace``."""

    chain: str
    user: Any
    conversation_id: str | None
    label: str | None
    version: int | str | None


@dataclass(frozen=True, slots=True)
class Assignment:
    """What the ``assign`` stage's hooks are handed, once the turn's one read trip is done:
    ``asked`` is the version the label or number asked for names (with the label's active
    experiment, ``ChainTarget.experiment``), ``target`` the one the turn runs so far (a
    conversation of a chain that pins versions continues on its own), ``conversation`` the
    caller's conversation as stored (``None``: a new one)."""

    chain: str
    user: Any
    input: TurnInput
    asked: ChainTarget
    target: ChainTarget
    conversation: StoredConversation | None


@dataclass(frozen=True, slots=True)
class Opening:
    """A turn its ``open`` stage has read and checked, before it writes anything (a claimed
    resume, a new conversation): its input, the version chosen and built, and the caller's
    conversation as stored (``None``: a new one)."""

    chain: str
    user: Any
    input: TurnInput
    target: ChainTarget
    compiled: CompiledChain
    conversation: StoredConversation | None


@dataclass
class Turn:
    """One turn, opened and ready to run (internal to the turn's stages; hooks of ``run``,
    ``finish`` and ``after_commit`` read it).

    ``context`` is the request context the chain runs with: the conversation, the principal,
    the trace id, the meter, the turn's :class:`~advisors_app.core.memory.TurnMemory`
    (``memory``, which also holds what the memory advisors would store) and the params' context
    keys. ``mode`` is ``CallLog.Mode.CALL`` or ``STREAM``, set when it runs.
    """

    compiled: CompiledChain
    target: ChainTarget
    user: Any
    message: str
    #: The stored conversation id (``CONVERSATION_ID``) and the one the caller sees.
    conversation_key: str
    conversation_id: str
    context: dict[str, Any]
    options: ChatOptions | None
    system: str | None
    trace_id: str
    trace: CallTrace
    memory: TurnMemory
    meter: TurnMeter
    times: StageTimes
    mode: str = CallLog.Mode.CALL
    #: Whether this turn created the conversation (removed again if the turn stores nothing).
    new_conversation: bool = False
    #: The conversation's title as the turn found or made it.
    title: str = ""
    #: A resume of tool calls paused for approval: the claimed decisions (``None``: a message).
    resume: Resume | None = None
    #: The id of the user's message stored pending before the chain ran (``None``: a resume),
    #: replaced by the turn's finish.
    pending_message: int | None = None
    #: When the turn started to run (``time.perf_counter()``): latency counts from here.
    started: float = field(default_factory=time.perf_counter)
    #: The last prompt that reached the model (serialised only for the outcome, after the
    #: turn: not on the way to its first token).
    final_prompt: Any = None
    #: The tool calls run so far, as the outcome lists them (``id``, ``name``, ...).
    tools: list[dict[str, Any]] = field(default_factory=list)
    #: When each of ``tools`` started (``time.perf_counter()``, same order): kept apart, since
    #: ``tools`` is what the outcome shows.
    tool_started: list[float] = field(default_factory=list)
    #: Where a stream's tool events go as they happen (``None``: a call, or no tool loop).
    tool_events: asyncio.Queue[Any] | None = None
    #: The documents the turn cites (:class:`~advisors_app.turn.sources.TurnSources`).
    sources: TurnSources = field(default_factory=TurnSources)
    #: The guard verdicts made so far (``Verdict.to_dict()``), in order.
    guard: list[dict[str, Any]] = field(default_factory=list)
    #: Events a stream without a tool loop sends before its next item (guard verdicts made
    #: while the chain ran between chunks).
    pending_events: list[Any] = field(default_factory=list)

    def spec(self, observer: Any) -> ChatClientRequestSpec:
        """The chain's request for this turn, observed by ``observer``."""
        spec = self.compiled.client.prompt(self.message).advisor_params(self.context)
        if self.system is not None:
            spec = spec.system(self.system)
        if self.options is not None:
            spec = spec.options(self.options)
        return spec.observer(observer)


@dataclass
class Finished:
    """A turn as its ``finish`` stage wrote it, handed to the ``finish`` hooks (inside the
    transaction) and the ``after_commit`` hooks (once it committed).

    ``outcome`` says what was stored (a ``finish`` hook may replace it, as the approvals hook
    adds the pending calls); ``message_id`` is the stored reply's id and ``conversation_pk``
    the conversation's row (``None``: nothing stored); ``call_log`` is the row written.
    ``messages_failed``: the turn's messages could not be written — the hooks run in the
    transaction that writes the call log alone, and the error is raised after it.
    """

    turn: Turn
    outcome: TurnOutcome
    call_log: CallLog
    message_id: int | None = None
    conversation_pk: int | None = None
    messages_failed: bool = False
