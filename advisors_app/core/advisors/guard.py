"""``GuardAdvisor``: checks at every boundary of a turn (rails), each with an action.

Rails (NeMo Guardrails' input, retrieval, execution and output rails; openai-guardrails'
stages): ``input`` (the user's message), ``documents`` (retrieved documents), ``tool_arguments``
(before a tool runs), ``tool_results`` (before the model reads them) and ``output`` (the
answer). Each rail is a list of :class:`RailCheck` — a :class:`~advisors_app.core.guards.GuardCheck`
and what to do when it flags the text:

=========  =========================================================================  ==========
action     effect                                                                     rails
=========  =========================================================================  ==========
``block``  the turn is refused (:data:`GUARD_BLOCKED`, finish reason                  all
           ``CONTENT_FILTER``; in streams the text sent so far is retracted)
``redact`` the check's redaction replaces the text, which goes on                     all
``drop``   a document or tool result is replaced by :data:`DROPPED_NOTICE`            documents,
                                                                                      tool_results
``reask``  the answer is generated once more, told why; flagged again → blocked       output
``hold``   the answer (or tool call) waits for a reviewer: withheld, with the held    output,
           text under :data:`GUARD_HELD` for the approvals queue                     tool_arguments
``log``    recorded, nothing else                                                     all
=========  =========================================================================  ==========

This advisor runs the ``input`` and ``output`` rails itself. The other rails run where their
text appears, inside the chain: the advisor puts a :class:`GuardSession` in the request
context under :data:`GUARD_SESSION`, and the retrieval advisors and the tool loop call
``await session.screen("documents", text)`` (a :class:`Screening`: the text to use and the
action taken). Every verdict of the turn — each flagged check, or failed check — is recorded
once, in order, in the response context and metadata under :data:`GUARD_VERDICTS` (a list of
:meth:`Verdict.to_dict`), and handed as it happens to the callable the request context holds
under :data:`GUARD_LISTENER`, if any (the turn's ``guard`` stream event).

Streams (``output``): ``check_first`` (default) holds the answer back in pieces of
``chunk_chars`` characters and checks each with the last ``context_chars`` characters already
released before it (so a phrase split between pieces is seen whole), releasing it only once
clean — as NeMo's streaming output rails do; ``stream_first`` releases every chunk at once and
checks behind it, retracting the answer (a refusal chunk) if a check flags it. In
``stream_first`` only ``block`` and ``log`` apply (text already sent cannot be redacted or
asked again): other actions block.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..advisor import HIGHEST_PRECEDENCE, AdvisorRole, CallAdvisor, StreamAdvisor
from ..attributes import TURN_MEMORY
from ..exceptions import GuardBlockedError
from ..guards.checks import Finding, GuardCheck
from ..guards.rails import DROPPED_NOTICE, GUARD_DROPPED, GUARD_SESSION
from ..mappings import EMPTY, freeze
from ..memory.turn import TurnMemory
from ..messages import AssistantMessage, UserMessage
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..streams import closing_stream
from ._support import answer, metadata_chunk, replace_texts
from .safe_guard import CONTENT_FILTER, SAFEGUARD_STAGE

__all__ = [
    "ACTIONS",
    "CHECK_FIRST",
    "DEFAULT_BLOCK_MESSAGE",
    "DEFAULT_HOLD_MESSAGE",
    "DROPPED_NOTICE",
    "GUARD_BLOCKED",
    "GUARD_DROPPED",
    "GUARD_HELD",
    "GUARD_LISTENER",
    "GUARD_REFUSAL",
    "GUARD_SESSION",
    "GUARD_VERDICTS",
    "RAILS",
    "RAIL_ACTIONS",
    "STREAM_FIRST",
    "GuardAdvisor",
    "GuardSession",
    "RailCheck",
    "Screening",
    "Verdict",
]

logger = logging.getLogger(__name__)

RAILS = ("input", "documents", "tool_arguments", "tool_results", "output")
ACTIONS = ("block", "redact", "drop", "reask", "hold", "log")
#: The actions each rail accepts.
RAIL_ACTIONS: Mapping[str, tuple[str, ...]] = {
    "input": ("block", "redact", "log"),
    "documents": ("drop", "redact", "block", "log"),
    "tool_arguments": ("block", "hold", "redact", "log"),
    "tool_results": ("drop", "redact", "block", "log"),
    "output": ("block", "redact", "reask", "hold", "log"),
}
#: Refusal code of a blocked turn (``Refusal.code`` and the transports' error code).
GUARD_BLOCKED = "guard_blocked"
#: Context and metadata key: the verdicts of the turn, a list of :meth:`Verdict.to_dict`.
GUARD_VERDICTS = "guard_verdicts"
#: Metadata key of a refusal: ``{"code": "guard_blocked", "rail", "check", "retract"}``.
GUARD_REFUSAL = "guard_refusal"
#: Metadata key of a held answer: ``{"rail": "output", "check", "text"}`` (the text withheld).
GUARD_HELD = "guard_held"
#: Request-context key of a callable given each :class:`Verdict` as it is made.
GUARD_LISTENER = "guard_listener"
CHECK_FIRST = "check_first"
STREAM_FIRST = "stream_first"

DEFAULT_BLOCK_MESSAGE = "I can't help with that: a safety check stopped this message."
DEFAULT_HOLD_MESSAGE = "The answer is waiting for a reviewer's approval."
_REASK = (
    "Your previous answer was withheld by a safety check ({reason}). Answer the user again "
    "without that content."
)
_STOPPING = frozenset({"block", "drop", "hold", "reask"})


@dataclass(frozen=True, slots=True)
class RailCheck:
    """A check on a rail and the ``action`` taken when it flags (``message``: a block's or a
    hold's text instead of the advisor's)."""

    check: GuardCheck
    action: str
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    """One flagged (or failed) check: on ``rail``, ``check`` (its name) with ``action``."""

    rail: str
    check: str
    action: str
    detail: Mapping[str, Any] = field(default=EMPTY)
    failed: bool = False
    ms: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "detail", freeze(self.detail))

    def to_dict(self) -> dict[str, Any]:
        """``{"rail", "check", "action", "detail", "failed", "ms"}`` (JSON-compatible)."""
        return {
            "rail": self.rail,
            "check": self.check,
            "action": self.action,
            "detail": _plain(self.detail),
            "failed": self.failed,
            "ms": round(self.ms, 3),
        }


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass(frozen=True, slots=True)
class Screening:
    """The result of one rail on one text: the ``text`` to use (redacted if so), the stopping
    ``action`` taken (``None``: the text passes), the :class:`RailCheck` that took it (or, for
    a passing text, the last one that redacted it), and the ``verdicts`` made."""

    text: str
    action: str | None = None
    by: RailCheck | None = None
    verdicts: tuple[Verdict, ...] = ()

    @property
    def passed(self) -> bool:
        return self.action is None


class GuardSession:
    """The rails of one request: :meth:`screen` a text on a rail, verdicts kept in order.

    Made by :class:`GuardAdvisor` per request and put in the request context under
    :data:`GUARD_SESSION`; ``listener`` (from :data:`GUARD_LISTENER`) gets each verdict.
    """

    __slots__ = ("_listener", "_rails", "verdicts")

    def __init__(
        self,
        rails: Mapping[str, Sequence[RailCheck]],
        listener: Callable[[Verdict], Any] | None = None,
    ) -> None:
        self._rails = rails
        self._listener = listener
        self.verdicts: list[Verdict] = []

    def has_rail(self, rail: str) -> bool:
        return bool(self._rails.get(rail))

    async def screen(self, rail: str, text: str) -> Screening:
        """Run ``rail``'s checks on ``text`` in order, each on the text the previous ones left
        (redactions apply to the next); the first check that flags with a stopping action
        (block, drop, hold, reask) ends the rail. ``KeyError`` for an unknown rail."""
        if rail not in RAIL_ACTIONS:
            raise KeyError(f"unknown guard rail {rail!r}; rails: {', '.join(RAILS)}")
        made: list[Verdict] = []
        redacted_by: RailCheck | None = None
        for entry in self._rails.get(rail, ()):
            found: Finding = await entry.check.run(text)
            if not found.flagged and not found.failed:
                continue
            action = entry.action if found.flagged else "log"
            if action == "redact" and found.redacted is None:
                action = "block"  # a check that cannot redact must not let the text through
            verdict = Verdict(
                rail, entry.check.name, action, found.detail, found.failed, found.seconds * 1000
            )
            made.append(verdict)
            self._record(verdict)
            if action == "redact" and found.redacted is not None:
                text, redacted_by = found.redacted, entry
            elif action in _STOPPING:
                return Screening(text, action, entry, tuple(made))
        return Screening(text, None, redacted_by, tuple(made))

    def _record(self, verdict: Verdict) -> None:
        self.verdicts.append(verdict)
        logger.info(
            "guard %s on %s: %s %s", verdict.check, verdict.rail, verdict.action, verdict.detail
        )
        if self._listener is not None:
            self._listener(verdict)


class GuardAdvisor(CallAdvisor, StreamAdvisor):
    """Guard rails around the model call (see the module docstring).

    ``rails`` maps a rail name to its :class:`RailCheck` list (actions checked against
    :data:`RAIL_ACTIONS`: ``ValueError`` otherwise). ``block_message`` and ``hold_message`` are
    the texts users see; ``stream_mode`` is :data:`CHECK_FIRST` or :data:`STREAM_FIRST`;
    ``chunk_chars`` (N) and ``context_chars`` (M) size the streamed output checks. Default
    order ``HIGHEST_PRECEDENCE + 100``: outside memory (a redacted message is what memory
    stores; a refusal is never stored) and outside the tool loop (the output rail sees the
    final answer).

    Refusals are answers, as :class:`SafeGuardAdvisor`'s: finish reason ``CONTENT_FILTER``
    (category "guardrail"), :data:`GUARD_REFUSAL` with code :data:`GUARD_BLOCKED` and
    ``safeguard_stage`` (``"input"``/``"output"``) in the metadata, so the Django layer stores
    no refused input and maps the code to its transports.
    """

    __slots__ = (
        "_block_message",
        "_chunk_chars",
        "_context_chars",
        "_hold_message",
        "_order",
        "_rails",
        "_stream_mode",
    )

    DEFAULT_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 100
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.GUARD})

    def __init__(
        self,
        rails: Mapping[str, Iterable[RailCheck]],
        *,
        order: int = DEFAULT_ORDER,
        block_message: str = DEFAULT_BLOCK_MESSAGE,
        hold_message: str = DEFAULT_HOLD_MESSAGE,
        stream_mode: str = CHECK_FIRST,
        chunk_chars: int = 200,
        context_chars: int = 50,
    ) -> None:
        checked: dict[str, tuple[RailCheck, ...]] = {}
        for rail, entries in rails.items():
            if rail not in RAIL_ACTIONS:
                raise ValueError(f"unknown guard rail {rail!r}; rails: {', '.join(RAILS)}")
            checked[rail] = tuple(entries)
            for entry in checked[rail]:
                if entry.action not in RAIL_ACTIONS[rail]:
                    raise ValueError(
                        f"action {entry.action!r} does not apply to the {rail} rail; "
                        f"use one of {', '.join(RAIL_ACTIONS[rail])}"
                    )
        if stream_mode not in (CHECK_FIRST, STREAM_FIRST):
            raise ValueError(f"stream_mode must be {CHECK_FIRST!r} or {STREAM_FIRST!r}")
        if chunk_chars < 1 or context_chars < 0:
            raise ValueError("chunk_chars must be >= 1 and context_chars >= 0")
        self._rails = checked
        self._order = order
        self._block_message = block_message
        self._hold_message = hold_message
        self._stream_mode = stream_mode
        self._chunk_chars = chunk_chars
        self._context_chars = context_chars

    @property
    def rails(self) -> Mapping[str, tuple[RailCheck, ...]]:
        return self._rails

    def may_hold(self, rail: str) -> bool:
        """Whether a check on ``rail`` holds its text for a reviewer (``hold``): on
        ``tool_arguments``, the turn may pause for approval."""
        return any(entry.action == "hold" for entry in self._rails.get(rail, ()))

    def session(self, context: Mapping[str, Any]) -> GuardSession:
        return GuardSession(self._rails, context.get(GUARD_LISTENER))

    # -- the input rail -------------------------------------------------------------------

    async def _open(
        self, request: ChatClientRequest
    ) -> tuple[ChatClientRequest, GuardSession, ChatClientResponse | None]:
        """The request to send on (input redacted, session in its context), or a refusal."""
        session = self.session(request.context)
        request = request.mutate(context={**request.context, GUARD_SESSION: session})
        if not session.has_rail("input"):
            return request, session, None
        screening = await session.screen("input", request.prompt.user_message.text)
        if screening.action is not None:
            return request, session, self._refusal(request.context, session, screening, "input")
        if screening.verdicts and screening.text != request.prompt.user_message.text:
            prompt = request.prompt.augment_user_message(screening.text)
            request = request.mutate(prompt=prompt)
        return request, session, None

    def _refusal(
        self,
        context: Mapping[str, Any],
        session: GuardSession,
        screening: Screening,
        stage: str,
        model_response: ChatResponse | None = None,
        held_text: str | None = None,
        retract: bool | None = None,
    ) -> ChatClientResponse:
        entry = screening.by
        check = entry.check.name if entry is not None else ""
        extra: dict[str, Any] = {
            SAFEGUARD_STAGE: stage,
            GUARD_VERDICTS: [v.to_dict() for v in session.verdicts],
        }
        if screening.action == "hold":
            text = (entry.message if entry else None) or self._hold_message
            extra[GUARD_HELD] = {"rail": stage, "check": check, "text": held_text or ""}
        else:
            text = (entry.message if entry else None) or self._block_message
            extra[GUARD_REFUSAL] = {
                "code": GUARD_BLOCKED,
                "rail": stage,
                "check": check,
                "retract": stage == "output" if retract is None else retract,
            }
        if stage == "output":
            # Memory inside this guard held the answer it withheld: the conversation keeps
            # the refusal the user got instead.
            memory = context.get(TURN_MEMORY)
            if isinstance(memory, TurnMemory):
                memory.revise_reply(AssistantMessage(text))
        return answer(
            text,
            _without_session(context),
            finish_reason=CONTENT_FILTER,
            extra=extra,
            metadata=model_response.metadata if model_response is not None else None,
        )

    def _blocked_inside(
        self,
        context: Mapping[str, Any],
        session: GuardSession,
        blocked: GuardBlockedError,
        *,
        retract: bool = False,
    ) -> ChatClientResponse:
        """The refusal for a rail inside the chain (documents, tool arguments or results) that
        blocked; ``retract``: text of the answer was already streamed."""
        screening = blocked.screening
        if not isinstance(screening, Screening):
            screening = Screening("", "block")
        elif screening.action != "block":
            screening = Screening(screening.text, "block", screening.by, screening.verdicts)
        return self._refusal(context, session, screening, blocked.rail, retract=retract)

    @staticmethod
    def _finished(response: ChatClientResponse, session: GuardSession) -> ChatClientResponse:
        context = _without_session(response.context)
        if not session.verdicts:
            return ChatClientResponse(response.chat_response, context)
        verdicts = [v.to_dict() for v in session.verdicts]
        chat = response.chat_response
        if chat is not None:
            chat = chat.with_metadata(**{GUARD_VERDICTS: verdicts})
        return ChatClientResponse(chat, {**context, GUARD_VERDICTS: verdicts})

    # -- calls --------------------------------------------------------------------------------

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        request, session, refusal = await self._open(request)
        if refusal is not None:
            return refusal
        try:
            response: ChatClientResponse = await chain.next_call(request)
        except GuardBlockedError as blocked:
            return self._blocked_inside(request.context, session, blocked)
        if not session.has_rail("output") or response.chat_response is None:
            return self._finished(response, session)
        for attempt in range(2):
            chat = response.chat_response
            if chat is None or chat.has_tool_calls():
                break
            screening = await session.screen("output", chat.text)
            if screening.action == "reask" and attempt == 0:
                try:
                    response = await chain.next_call(_reasked(request, chat.text, screening))
                except GuardBlockedError as blocked:
                    return self._blocked_inside(request.context, session, blocked)
                continue
            if screening.action is not None:
                return self._refusal(
                    response.context, session, screening, "output", chat, held_text=chat.text
                )
            if screening.text != chat.text:
                response = ChatClientResponse(
                    replace_texts(chat, {0: screening.text}), response.context
                )
            break
        return self._finished(response, session)

    # -- streams ------------------------------------------------------------------------------

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        request, session, refusal = await self._open(request)
        if refusal is not None:
            yield refusal
            return
        context: Mapping[str, Any] = request.context
        released = False  # whether text of the answer reached the client
        try:
            if not session.has_rail("output"):
                async with closing_stream(chain.next_stream(request)) as chunks:
                    async for chunk in chunks:
                        context = chunk.context
                        released = released or _has_text(chunk)
                        yield chunk
            else:
                attempt_request: ChatClientRequest | None = request
                attempts = 0
                while attempt_request is not None:
                    attempts += 1
                    output = _StreamedOutput(self, session, allow_reask=attempts == 1)
                    async for chunk in output.run(chain.next_stream(attempt_request)):
                        context = chunk.context
                        released = released or _has_text(chunk)
                        yield chunk
                    attempt_request = (
                        _reasked(request, output.text, output.stopped)
                        if output.asks_again and output.stopped is not None
                        else None
                    )
        except GuardBlockedError as blocked:
            yield self._blocked_inside(context, session, blocked, retract=released)
            return
        if session.verdicts:
            yield metadata_chunk(
                _without_session(context),
                {GUARD_VERDICTS: [v.to_dict() for v in session.verdicts]},
            )


class _StreamedOutput:
    """One streamed answer under the output rail (``check_first`` or ``stream_first``)."""

    def __init__(self, guard: GuardAdvisor, session: GuardSession, *, allow_reask: bool) -> None:
        self.guard = guard
        self.session = session
        self.allow_reask = allow_reask
        self.text = ""  # everything the model wrote so far
        self.released = ""  # what reached the client
        self.pending = ""  # written, not yet checked (check_first) or not yet checked behind
        self.stopped: Screening | None = None

    @property
    def asks_again(self) -> bool:
        """Whether the answer was stopped to be asked again (nothing of it was released)."""
        stop = self.stopped
        return (
            stop is not None and stop.action == "reask" and self.allow_reask and not self.released
        )

    async def _check(self) -> tuple[str, Screening | None]:
        """Check the pending text with its left context; return what to release, or the
        screening that stops the answer."""
        if self.guard._stream_mode == STREAM_FIRST:
            before = self.text[: len(self.text) - len(self.pending)]
        else:
            before = self.released
        tail = before[-self.guard._context_chars :] if self.guard._context_chars else ""
        screening = await self.session.screen("output", tail + self.pending)
        pending, self.pending = self.pending, ""
        if screening.action is not None:
            return "", screening
        if self.guard._stream_mode == STREAM_FIRST and screening.text != tail + pending:
            # Redacting text the client already has cannot work: retract it instead.
            return "", Screening(screening.text, "block", screening.by, screening.verdicts)
        if screening.text == tail + pending:
            return pending, None
        if screening.text.startswith(tail):
            return screening.text[len(tail) :], None
        # The redaction reached into the released context: redact the new text on its own.
        alone = await self.session.screen("output", pending)
        return alone.text, alone if alone.action is not None else None

    async def run(
        self, stream: AsyncIterator[ChatClientResponse]
    ) -> AsyncIterator[ChatClientResponse]:
        guard = self.guard
        first = guard._stream_mode == STREAM_FIRST
        context: Mapping[str, Any] = {}
        async with closing_stream(stream) as chunks:
            async for chunk in chunks:
                context = chunk.context
                chat = chunk.chat_response
                generation = chat.result if chat is not None else None
                if chat is None or generation is None or chat.has_tool_calls():
                    yield chunk
                    continue
                piece = generation.text
                self.text += piece
                self.pending += piece
                final = bool(generation.finish_reason)
                due = final or len(self.pending) >= guard._chunk_chars
                if first:
                    self.released += piece
                    if due:
                        _, stop = await self._check()
                        if stop is not None:
                            self.stopped = _as_block(stop)
                            break
                    yield chunk
                    continue
                out = ""
                if due:
                    out, stop = await self._check()
                    if stop is not None:
                        self.stopped = stop
                        break
                    self.released += out
                if out or final or len(chat.generations) > 1 or chat.metadata.usage is not None:
                    yield ChatClientResponse(replace_texts(chat, {0: out}), chunk.context)
        if self.stopped is None and self.pending and not first:
            out, stop = await self._check()
            if stop is None:
                self.released += out
                yield ChatClientResponse(replace_texts(ChatResponse(), {0: out}), context)
                return
            self.stopped = stop
        elif self.stopped is None and self.pending and first:
            _, stop = await self._check()
            self.stopped = _as_block(stop) if stop is not None else None
        stop = self.stopped
        if stop is None:
            return
        if self.asks_again:
            return  # the caller streams a new answer
        if stop.action in ("reask", "redact", "drop"):
            stop = Screening(stop.text, "block", stop.by, stop.verdicts)
        yield guard._refusal(context, self.session, stop, "output", held_text=self.text)


def _has_text(chunk: ChatClientResponse) -> bool:
    chat = chunk.chat_response
    return chat is not None and any(g.output.text for g in chat.generations)


def _as_block(screening: Screening) -> Screening:
    """In ``stream_first`` the text is out already: every stopping action retracts it."""
    if screening.action in ("hold", "block"):
        return screening
    return Screening(screening.text, "block", screening.by, screening.verdicts)


def _reasked(
    request: ChatClientRequest, answer_text: str, screening: Screening
) -> ChatClientRequest:
    """The request again, with the withheld answer and why it was withheld."""
    entry = screening.by
    reason = entry.check.name if entry is not None else "guard"
    messages = [
        *request.prompt.instructions,
        AssistantMessage(answer_text),
        UserMessage(_REASK.format(reason=reason)),
    ]
    return request.mutate(prompt=request.prompt.mutate(messages=messages))


def _without_session(context: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in context.items() if k != GUARD_SESSION}
