"""``SessionMemoryAdvisor``: session memory on each model call, inside the tool loop (Spring 2.1).

Spring AI 2.1's ``SessionMemoryAdvisor`` (docs "ChatClient Integration") works on every model
call: it loads the session's view into the prompt and stores the request's user message or tool
results and the model's reply. Its partner ``SessionTurnAdvisor``
(:mod:`~advisors_app.core.advisors.session_turn`) works once per ``ChatClient`` call, outside
the loop. The prompt of each call is::

    [system: the stored system messages + the request's, merged; then the newest summary]
    + the view's messages the request does not carry
    + this turn's messages so far (user input, tool calls, tool results) the request lacks
    + the request's messages

so it is right whether the tool loop sends each round the whole history or, with
``conversation_history_enabled=False`` (what ``ChatClient`` auto-registers when memory runs
inside the loop), only the latest tool results. With ``summary_placement="user"`` the summary
goes in front of the text of the prompt's last user message instead of into the system message
(our addition: SmolLM2-135M answers from text it reads there, and ignores a fact at the end of
its system message; see docs/memory.md). The log keeps the message as typed.

**Divergence (atomicity, as our 2.0 memory advisors; DESIGN §5):** Spring AI appends each
message to the log as the call sees it, so a failed model call leaves an orphan user message or
a tool call without its results. Here the advisor records the turn in a per-call journal
(:class:`SessionTurn`, in the request context under :data:`SESSION_TURN`, created by
``SessionTurnAdvisor``), and the turn advisor appends the turn **whole**, in one append, when the
call returns: a failed call stores nothing; an interrupted stream stores its user input and the
partial reply flagged ``interrupted`` (the 2.0 policy: nothing when no text came). The log keeps
what the user typed: the user input stored is the one the turn advisor saw, before retrieval or
rewriting advisors inside it changed the message. Used alone (no turn advisor), this advisor
stores each model call's new input and reply in one append after the call, and the turn's view
is read per call.

A host that stores the turn itself (a
:class:`~advisors_app.core.memory.turn.TurnMemory` for the conversation in the request context,
under ``TURN_MEMORY``) is handed the turn's messages instead of the repository: it writes them
with the rest of the turn.

A guard's refusal (finish reason ``CONTENT_FILTER``) makes the turn store nothing (bug case
B14). Tool calls paused for approval are stored flagged ``approval_pending``; a new user message
after them answers them for the model as not executed, as the 2.0 advisors do.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..advisor import DEFAULT_TOOL_CALLING_ORDER, CallAdvisor, MemoryAdvisor, StreamAdvisor
from ..aggregation import ChatClientResponseAccumulator
from ..attributes import CONVERSATION_ID, TRACE_ID, TRACE_ID_METADATA
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..memory.history import _overlap, align_request, has_content
from ..memory.ids import (
    APPROVAL_PENDING,
    CANCELLED,
    ERROR,
    FINISH_REASON,
    INTERRUPTED,
    check_conversation_id,
)
from ..memory.session import SessionRepository, SessionView
from ..memory.turn import TurnMemory, turn_memory_of
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..streams import closing_stream
from ..tools.manager import ToolExecutionResult
from .tool_calling import APPROVAL_REQUIRED

__all__ = [
    "NOT_EXECUTED",
    "SESSION_TURN",
    "SUMMARY_HEADER",
    "SUMMARY_PLACEMENTS",
    "SessionMemoryAdvisor",
    "SessionTurn",
]

#: Request-context key of the turn's :class:`SessionTurn` (set by ``SessionTurnAdvisor``).
SESSION_TURN = "advisors.session.turn"
#: What precedes the newest summary in the system message (or the user message).
SUMMARY_HEADER = "Summary of the earlier conversation:"
#: Where a prompt carries the summary: ``"system"`` (end of the system message, Spring AI's
#: place) or ``"user"`` (before the text of the prompt's last user message).
SUMMARY_PLACEMENTS = ("system", "user")
#: Metadata flag of the tool responses written for calls that never got a result.
NOT_EXECUTED = "not_executed"
#: The finish reason of a guard's refusal: such a turn is not stored.
REFUSED = "CONTENT_FILTER"


def _unanswered_calls(message: Message | None) -> AssistantMessage | None:
    if isinstance(message, AssistantMessage) and message.tool_calls:
        return message
    return None


def not_executed(pending: AssistantMessage, why: str) -> ToolResponseMessage:
    """Answers, for the model, to ``pending``'s calls that never got a result."""
    return ToolResponseMessage(
        tuple(
            ToolResponse(call.id, call.name, f"The call to tool '{call.name}' {why}")
            for call in pending.tool_calls
        ),
        {NOT_EXECUTED: True},
    )


@dataclass(eq=False)
class SessionTurn:
    """One ``ChatClient`` call's journal of its session turn (per-call state, in the context).

    ``view`` is the session view read once for the turn; ``history`` the part of it the prompts
    carry; ``new_input`` the turn's input as the caller sent it (``None``: not known yet);
    ``journal`` what the model calls added after it (replies, tool results); ``sent`` what the
    turn's prompts held after the history, in order; ``rounds`` the model calls made; ``held``
    the request's ``TurnMemory`` for the conversation (``None``: none), which the turn's
    messages go to instead of the repository.
    """

    conversation_id: str
    view: SessionView
    trace_id: str | None = None
    new_input: tuple[Message, ...] | None = None
    history: tuple[Message, ...] = ()
    journal: list[Message] = field(default_factory=list)
    sent: list[Message] = field(default_factory=list)
    rounds: int = 0
    refused: bool = False
    held: TurnMemory | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "rounds": self.rounds}

    async def store(self, repository: SessionRepository, messages: Sequence[Message]) -> None:
        """Append ``messages`` to the log: held for the host when a ``TurnMemory`` holds the
        conversation, else in ``repository`` (nothing for none)."""
        if not messages:
            return
        if self.held is not None:
            self.held.append(messages)
        else:
            await repository.aappend(self.conversation_id, messages)

    def align(self, conversation: Sequence[Message]) -> tuple[Message, ...]:
        """Set :attr:`history` for a request whose non-system messages are ``conversation``;
        return the request's messages the session does not hold yet (checked), after "not
        executed" answers to tool calls the view leaves pending (a paused reply the user did
        not decide on)."""
        view = self.view.messages
        history, new = align_request(view, range(len(view)), list(conversation))
        if not new or isinstance(new[-1], AssistantMessage):
            raise ValueError(
                "the prompt has no new user message for session memory: after the last "
                "assistant message it needs a non-blank user message or a tool response that "
                "the session does not hold yet"
            )
        self.history = tuple(history)
        pending = _unanswered_calls(history[-1] if history else None)
        if pending is not None and not isinstance(new[0], ToolResponseMessage):
            answers = not_executed(
                pending, "was not executed: the user sent a new message instead of deciding on it."
            )
            return (answers, *new)
        return tuple(new)

    def messages_to_store(
        self, response: ChatResponse | None, reason: str | None = None, partial: str = ""
    ) -> list[Message]:
        """The turn's messages for the log, once the call ended.

        ``reason`` is ``None`` for a completed call (``response`` its final response), else
        ``CANCELLED``/``ERROR`` with ``partial`` the reply text received so far. Tool calls
        left without results get "not executed" answers, so the log never holds a call without
        its response; a return-direct ending stores the tool results and the reply it returned.
        """
        if self.refused or self.new_input is None:
            return []
        messages: list[Message] = [*self.new_input, *self.journal]
        pending = _unanswered_calls(messages[-1])
        if reason is not None:
            if not partial.strip():
                return []
            if pending is not None:
                messages.append(not_executed(pending, "got no result: the turn ended before it."))
            messages.append(AssistantMessage(partial, {INTERRUPTED: True, FINISH_REASON: reason}))
            return self._traced(messages)
        generation = response.generations[0] if response and response.generations else None
        if generation is None:
            return self._traced(messages) if self.journal else []
        finish = generation.finish_reason
        if finish == REFUSED:
            return []
        if pending is not None:
            if finish == APPROVAL_REQUIRED:
                messages[-1] = pending.with_metadata(**{APPROVAL_PENDING: True})
                return self._traced(messages)
            assert response is not None
            if finish == ToolExecutionResult.FINISH_REASON:
                messages.append(_returned_results(response))
            else:
                messages.append(
                    not_executed(pending, "was not executed: the tool loop stopped before it.")
                )
            text = "\n".join(g.output.text for g in response.generations if g.output.text)
            if text.strip():
                messages.append(AssistantMessage(text))
        elif (not self.journal or self.journal[-1] != generation.output) and has_content(
            generation.output
        ):
            messages.append(generation.output)  # answered without a model round
        return self._traced(messages)

    def _traced(self, messages: list[Message]) -> list[Message]:
        """``messages`` with the turn's trace id on the last assistant message."""
        if self.trace_id is None:
            return messages
        for index in range(len(messages) - 1, -1, -1):
            if isinstance(messages[index], AssistantMessage):
                messages[index] = messages[index].with_metadata(
                    **{TRACE_ID_METADATA: self.trace_id}
                )
                break
        return messages


def _returned_results(response: ChatResponse) -> ToolResponseMessage:
    """The tool results a return-direct ending returned as generations."""
    return ToolResponseMessage(
        tuple(
            ToolResponse(
                str(g.output.metadata.get(ToolExecutionResult.METADATA_TOOL_ID, "")),
                str(g.output.metadata.get(ToolExecutionResult.METADATA_TOOL_NAME, "")),
                g.output.text,
            )
            for g in response.generations
        )
    )


def _reply(response: ChatResponse | None) -> AssistantMessage | None:
    if response is None or not response.generations:
        return None
    return response.generations[0].output


def _merge_system(systems: Sequence[Message], summary: str) -> SystemMessage | None:
    texts: list[str] = []
    for message in systems:
        if message.text.strip() and message.text not in texts:
            texts.append(message.text)
    if summary.strip():
        texts.append(f"{SUMMARY_HEADER}\n{summary.strip()}")
    return SystemMessage("\n\n".join(texts)) if texts else None


def _with_summary_in_user(
    messages: tuple[Message, ...], summary: str
) -> tuple[Message, ...] | None:
    """``messages`` with ``summary`` in front of the last user message's text (``None``: the
    prompt holds no user message)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            text = f"{SUMMARY_HEADER}\n{summary.strip()}\n\n{message.text}"
            return (*messages[:index], message.mutate(text=text), *messages[index + 1 :])
    return None


def conversation_id_of(context: Mapping[str, Any], default: str | None) -> str:
    """The call's conversation id: context ``CONVERSATION_ID``, else ``default``."""
    value = context.get(CONVERSATION_ID)
    return check_conversation_id(default if value is None else value)


class SessionMemoryAdvisor(CallAdvisor, StreamAdvisor, MemoryAdvisor):
    """Loads the session view into each model call's prompt and records the call in the turn.

    ``SessionMemoryAdvisor(repository, order=DEFAULT_ORDER, *, default_conversation_id=None,
    summary_placement="system")``. ``DEFAULT_ORDER`` is just inside the tool loop
    (``HIGHEST_PRECEDENCE + 301``); ``summary_placement`` is one of :data:`SUMMARY_PLACEMENTS`.
    Raises ``ValueError`` for a missing repository, an unknown placement, a missing
    conversation id and a request without new input (see :meth:`SessionTurn.align`). See the
    module docstring for what is stored.
    """

    DEFAULT_ORDER: ClassVar[int] = DEFAULT_TOOL_CALLING_ORDER + 1
    AFTER_SIDE_EFFECTS: ClassVar[bool] = True
    #: Belongs inside the tool loop (``ChatClient`` does not warn about it there, bug case B09).
    INSIDE_TOOL_LOOP: ClassVar[bool] = True

    def __init__(
        self,
        repository: SessionRepository,
        order: int = DEFAULT_ORDER,
        *,
        default_conversation_id: str | None = None,
        summary_placement: str = "system",
    ) -> None:
        if repository is None:
            raise ValueError("sessionRepository cannot be null")
        if default_conversation_id is not None:
            check_conversation_id(default_conversation_id)
        if summary_placement not in SUMMARY_PLACEMENTS:
            raise ValueError(
                f"summary_placement must be one of {SUMMARY_PLACEMENTS}, got {summary_placement!r}"
            )
        self.repository = repository
        self._order = order
        self.default_conversation_id = default_conversation_id
        self.summary_placement = summary_placement

    @property
    def name(self) -> str:
        return "SessionMemoryAdvisor"

    async def _turn(self, request: ChatClientRequest) -> tuple[SessionTurn, bool]:
        """The call's turn, and whether this advisor owns it (no turn advisor around it)."""
        conversation_id = conversation_id_of(request.context, self.default_conversation_id)
        turn = request.context.get(SESSION_TURN)
        if isinstance(turn, SessionTurn) and turn.conversation_id == conversation_id:
            return turn, False
        view = await self.repository.aload_view(conversation_id)
        held = turn_memory_of(request.context, conversation_id)
        return SessionTurn(conversation_id, view, request.context.get(TRACE_ID), held=held), True

    def _advised(self, request: ChatClientRequest, turn: SessionTurn) -> ChatClientRequest:
        instructions = request.prompt.instructions
        conversation = [m for m in instructions if not isinstance(m, SystemMessage)]
        systems = [*turn.view.system, *(m for m in instructions if isinstance(m, SystemMessage))]
        if turn.rounds == 0:
            if turn.new_input is None:
                turn.new_input = turn.align(conversation)
            else:
                turn.align(conversation)  # the history; the input is the turn advisor's
            # "not executed" answers the turn adds before the request's own input
            between = [m for m in turn.new_input if m.metadata.get(NOT_EXECUTED)]
        else:
            held = _overlap(turn.sent, conversation)
            between = turn.sent[: len(turn.sent) - held]
        summary = turn.view.summary
        messages = (*turn.history, *between, *conversation)
        if self.summary_placement == "user" and summary.strip():
            placed = _with_summary_in_user(messages, summary)
            if placed is not None:
                messages, summary = placed, ""
        system = _merge_system(systems, summary)
        head = (system,) if system is not None else ()
        messages = (*head, *messages)
        return request.mutate(prompt=request.prompt.mutate(messages=messages))

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        turn, owned = await self._turn(request)
        advised = self._advised(request, turn)
        response = await chain.next_call(advised)
        _record(turn, request, response.chat_response)
        if owned:
            await turn.store(self.repository, turn.messages_to_store(response.chat_response))
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        turn, owned = await self._turn(request)
        advised = self._advised(request, turn)
        accumulator = ChatClientResponseAccumulator()
        try:
            async with closing_stream(chain.next_stream(advised)) as chunks:
                async for chunk in chunks:
                    accumulator.add(chunk)
                    yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            if owned:
                await _store_interrupted(self.repository, turn, accumulator, CANCELLED)
            raise
        except Exception:
            if owned:
                await _store_interrupted(self.repository, turn, accumulator, ERROR)
            raise
        response = accumulator.result().chat_response
        _record(turn, request, response)
        if owned:
            await turn.store(self.repository, turn.messages_to_store(response))


def _record(turn: SessionTurn, request: ChatClientRequest, response: ChatResponse | None) -> None:
    """Record a model call in ``turn``: the messages its request added, and its reply."""
    conversation = [m for m in request.prompt.instructions if not isinstance(m, SystemMessage)]
    reply = _reply(response)
    if (
        response is not None
        and reply is not None
        and response.generations[0].finish_reason == REFUSED
    ):
        turn.refused = True
    if turn.rounds == 0:
        turn.sent = list(conversation)
    else:
        held = _overlap(turn.sent, conversation)
        turn.journal.extend(m for m in conversation[held:] if has_content(m))
        turn.sent = [*turn.sent[: len(turn.sent) - held], *conversation]
    if reply is not None and has_content(reply):
        turn.journal.append(reply)
        turn.sent.append(reply)
    turn.rounds += 1


_pending_stores: set[asyncio.Task[None]] = set()


async def _store_interrupted(
    repository: SessionRepository,
    turn: SessionTurn,
    accumulator: ChatClientResponseAccumulator,
    reason: str,
) -> None:
    """Store the interrupted turn, shielded from a second cancel; never raises."""
    reply = _reply(accumulator.result().chat_response)
    messages = turn.messages_to_store(None, reason, reply.text if reply is not None else "")
    if not messages or turn.held is not None:
        await turn.store(repository, messages)  # held: nothing to wait for
        return
    task = asyncio.ensure_future(repository.aappend(turn.conversation_id, messages))
    _pending_stores.add(task)
    task.add_done_callback(_pending_stores.discard)
    # The caller re-raises its own exception; a failed store was logged by the repository.
    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.shield(task)
