"""The guard rails that run inside the chain: ``documents``, ``tool_arguments``, ``tool_results``.

:class:`~advisors_app.core.advisors.guard.GuardAdvisor` runs the ``input`` and ``output`` rails
itself and puts its ``GuardSession`` in the request context under :data:`GUARD_SESSION`; the
advisors that meet the other rails' texts call the functions here, which do nothing when the
context holds no session or the session has no such rail (a chain without a guard pays one
dictionary look-up):

* the retrieval advisors (``QuestionAnswerAdvisor``, ``RetrievalAugmentationAdvisor``,
  ``VectorStoreChatMemoryAdvisor``) call :func:`screen_documents` after retrieval and before
  the documents enter the prompt;
* the tool loop (``ToolCallingAdvisor``) calls :func:`screen_tool_round` before the calls of a
  reply run (after a reviewer's edits, on a resume) and :func:`screen_tool_results` before the
  model reads their results.

Actions: ``drop`` replaces a document's (or tool result's) text with :data:`DROPPED_NOTICE` and
marks a document's metadata with :data:`GUARD_DROPPED` (the check's name), so the prompt says
something was withheld and the turn's sources leave it out; ``redact`` puts the check's
redaction in place of the text; ``block`` raises
:class:`~advisors_app.core.exceptions.GuardBlockedError`, which the ``GuardAdvisor`` answers
with its refusal; ``hold`` (tool arguments) pauses the turn with the call in the approvals
queue, as a tool that needs approval does — on the resume, a call a reviewer approved or
edited runs (their decision stands), a held call nobody decided is blocked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Protocol

from ..exceptions import GuardBlockedError
from ..messages import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage
from ..response import ChatResponse
from ..tools.approval import (
    ALL_DECISIONS,
    ApprovalDecision,
    PendingToolCall,
    ToolCallDecision,
    index_decisions,
    parse_arguments,
)
from ..vectorstore import Document

__all__ = [
    "DROPPED_NOTICE",
    "GUARD_DROPPED",
    "GUARD_REDACTED",
    "GUARD_SESSION",
    "RailSession",
    "ToolRound",
    "guard_session",
    "screen_documents",
    "screen_tool_results",
    "screen_tool_round",
]

#: Request-context key of the turn's ``GuardSession``.
GUARD_SESSION = "guard_session"
#: What a dropped document or tool result is replaced with.
DROPPED_NOTICE = "[Removed by a guard: this content looked like instructions to the assistant.]"
#: Document-metadata key of a dropped document: the name of the check that dropped it.
GUARD_DROPPED = "guard_dropped"
#: Document-metadata key of a redacted document: the name of the check that redacted it.
GUARD_REDACTED = "guard_redacted"


class RailSession(Protocol):
    """What the rails need of a ``GuardSession``."""

    def has_rail(self, rail: str) -> bool: ...

    async def screen(self, rail: str, text: str) -> Any: ...


def guard_session(context: Mapping[str, Any], rail: str) -> RailSession | None:
    """The request's guard session if it has checks on ``rail``, else ``None``."""
    session = context.get(GUARD_SESSION)
    if session is None or not session.has_rail(rail):
        return None
    return session  # type: ignore[no-any-return]


def _check_name(screening: Any) -> str:
    entry = screening.by
    return entry.check.name if entry is not None else ""


def _blocked(rail: str, screening: Any) -> GuardBlockedError:
    return GuardBlockedError(rail, _check_name(screening), screening)


async def screen_documents(
    context: Mapping[str, Any], documents: Sequence[Document]
) -> list[Document]:
    """``documents`` after the ``documents`` rail, in order: dropped ones replaced by
    :data:`DROPPED_NOTICE` (metadata :data:`GUARD_DROPPED`), redacted ones with their
    redaction (metadata :data:`GUARD_REDACTED`). Raises ``GuardBlockedError`` on a block."""
    session = guard_session(context, "documents")
    if session is None:
        return list(documents)
    screened = []
    for document in documents:
        screening = await session.screen("documents", document.text)
        if screening.action == "drop":
            marked = {**document.metadata, GUARD_DROPPED: _check_name(screening)}
            document = replace(document, text=DROPPED_NOTICE, metadata=marked)
        elif screening.action is not None:
            raise _blocked("documents", screening)
        elif screening.text != document.text:
            marked = {**document.metadata, GUARD_REDACTED: _check_name(screening)}
            document = replace(document, text=screening.text, metadata=marked)
        screened.append(document)
    return screened


async def screen_tool_results(
    context: Mapping[str, Any], message: ToolResponseMessage
) -> ToolResponseMessage:
    """``message`` after the ``tool_results`` rail: each response dropped
    (:data:`DROPPED_NOTICE`), redacted or kept. Raises ``GuardBlockedError`` on a block."""
    session = guard_session(context, "tool_results")
    if session is None:
        return message
    responses: list[ToolResponse] = []
    for response in message.responses:
        screening = await session.screen("tool_results", response.response_data)
        if screening.action == "drop":
            response = replace(response, response_data=DROPPED_NOTICE)
        elif screening.action is not None:
            raise _blocked("tool_results", screening)
        elif screening.text != response.response_data:
            response = replace(response, response_data=screening.text)
        responses.append(response)
    if all(a is b for a, b in zip(responses, message.responses, strict=True)):
        return message
    return replace(message, responses=tuple(responses))


class ToolRound:
    """A reply's tool calls as the ``tool_arguments`` rail leaves them: the ``chat_response``
    and ``decisions`` to run them with (arguments redacted), or ``held`` — the calls to pause
    the turn for (non-empty: nothing runs)."""

    __slots__ = ("chat_response", "decisions", "held")

    def __init__(
        self,
        chat_response: ChatResponse,
        decisions: Any,
        held: tuple[PendingToolCall, ...] = (),
    ) -> None:
        self.chat_response = chat_response
        self.decisions = decisions
        self.held = held


def _held_call(call: ToolCall, screening: Any) -> PendingToolCall:
    arguments = parse_arguments(call.arguments)
    return PendingToolCall(
        call.id,
        call.name,
        call.arguments if arguments is None else arguments,
        ALL_DECISIONS,
        f"held by the guard check {_check_name(screening)!r} on the tool's arguments",
    )


async def screen_tool_round(
    context: Mapping[str, Any],
    manager: Any,
    options: Any,
    chat_response: ChatResponse,
    decisions: Iterable[ToolCallDecision | Mapping[str, Any]] | None,
    granted: Iterable[str] = (),
) -> ToolRound:
    """The ``tool_arguments`` rail on the calls of ``chat_response``'s tool-call reply, as
    ``manager`` (a ``ToolCallingManager``) would run them: with ``decisions`` (a resume), the
    reviewer's edits applied and rejected calls left out.

    ``block`` raises ``GuardBlockedError``; ``redact`` rewrites the call's arguments; ``hold``
    returns the calls to pause for (with the calls the manager's own policy holds, so one pause
    covers the reply) — on a resume a held call with an approve or edit decision runs, one
    without is blocked.
    """
    round_ = ToolRound(chat_response, decisions)
    session = guard_session(context, "tool_arguments")
    if session is None:
        return round_
    index, generation = next(
        (i, g) for i, g in enumerate(chat_response.generations) if g.output.tool_calls
    )
    assistant: AssistantMessage = generation.output
    granted = frozenset(granted)
    indexed = None if decisions is None else index_decisions(decisions)
    if indexed is not None:
        assistant = manager.check_decisions(assistant, options, list(indexed.values()), granted)
    calls: list[ToolCall] = []
    held: list[tuple[ToolCall, Any]] = []
    for call in assistant.tool_calls:
        decision = indexed.get(call.id) if indexed is not None else None
        if decision is not None and decision.decision is ApprovalDecision.REJECT:
            calls.append(call)  # never runs: nothing to screen
            continue
        screening = await session.screen("tool_arguments", call.arguments)
        if screening.action == "hold":
            if indexed is None:
                held.append((call, screening))
            elif decision is None:
                raise _blocked("tool_arguments", screening)
            calls.append(call)  # a reviewer decided it: their decision stands
        elif screening.action is not None:
            raise _blocked("tool_arguments", screening)
        else:
            calls.append(replace(call, arguments=screening.text))
    if held:
        callbacks = {cb.name: cb for cb in manager.resolve_tool_callbacks(options)}
        pending = {p.approval_id: p for p in manager.pending_approvals(calls, callbacks, granted)}
        for call, screening in held:
            pending.setdefault(call.id, _held_call(call, screening))
        round_.held = tuple(pending[c.id] for c in calls if c.id in pending)
        return round_
    if all(a.arguments == b.arguments for a, b in zip(calls, assistant.tool_calls, strict=True)):
        return round_  # nothing redacted: the manager runs the reply (and its decisions) as is
    # Arguments changed (redacted, or edited by a reviewer and then redacted): the reply runs
    # as screened, and an edit becomes an approval of the arguments already in it.
    screened = replace(assistant, tool_calls=tuple(calls))
    generations = list(chat_response.generations)
    generations[index] = replace(generation, output=screened)
    round_.chat_response = chat_response.mutate(generations=tuple(generations))
    if indexed is not None:
        round_.decisions = [
            ToolCallDecision(d.approval_id, ApprovalDecision.APPROVE)
            if d.decision is ApprovalDecision.EDIT
            else d
            for d in indexed.values()
        ]
    return round_
