"""``BaseChatMemoryAdvisor``: what the memory advisors share (Spring AI ``BaseChatMemoryAdvisor``).

One user turn = read the conversation, send the prompt, store the new input **and** the reply
together when the turn completes. Spring AI's ``MessageChatMemoryAdvisor`` writes the user
message in ``before``, so a failed model call leaves an orphan user turn, and a stream that is
cancelled or breaks stores nothing of the reply (seed §6.16.2 #7, defect 5.3.13, bug cases B05
and B06). Here:

* **call**: the turn is stored in one ``append`` after the model answered; if the model (or an
  inner advisor) raises, or the call is cancelled, nothing is stored;
* **stream**: chunks pass through as they arrive; on normal completion the turn is stored once,
  from the aggregated response, whether or not a finish reason was sent. If the consumer stops
  early (closes the stream, its task is cancelled: client gone, "stop", timeout) or the
  provider fails mid-stream, the partial reply received so far is stored with
  ``metadata = {"interrupted": True, "finish_reason": "cancelled" | "error"}`` together with the
  user input, and the original exception propagates. **Policy for an empty partial reply**:
  when nothing visible was received (no non-whitespace text) the turn is not stored at all,
  exactly as a failed call: an empty assistant message is invalid input for several providers
  and records nothing. Partial tool calls are not stored (a call without its result would be
  rejected by providers on the next turn).

Divergences from Spring AI besides atomicity, each a fix (reference §5.3): only the first
(chosen) generation is stored (defect 17); what is stored with the reply comes only from the
request, never from history: every non-blank message of the request that memory does not hold
yet, in order, so a tool exchange the caller ran (``[U, A(call), T]``) is stored whole where
Spring AI stores only its last user message or tool response (issue 17), and blank messages are
not stored (defect 14, bug case B01); a request whose last non-blank message is not such a new
user message or tool response raises ``ValueError`` before the model is called; the prompt has
exactly one system message, at index 0: the stored system messages and the request's are
merged, in that order, distinct texts joined by a blank line (defect 15, bug case B02); history
the request already carries is not added again: the request is compared with the newest stored
messages, not only with the window, so a window that skips part of a long turn is not sent a
second time in front of it (issue 17; see ``ChatMemory.history_for``); messages are compared in
linear time with metadata ignored (defect 16). The conversation id is resolved once per turn and
used for the read and the write: context ``CONVERSATION_ID`` > ``default_conversation_id`` >
``ValueError("conversationId cannot be null")``, checked by
:func:`~advisors_app.core.memory.ids.check_conversation_id` (defect 22, bug case B04).

A host that stores the turn itself (its request context holds a
:class:`~advisors_app.core.memory.turn.TurnMemory` for the conversation, under ``TURN_MEMORY``)
gets the turn instead: the advisor reads the conversation as the host read it ahead and hands it
the messages it would store (``ChatMemory.for_turn``); without one it reads and writes its
``ChatMemory`` as described here.

The stored reply carries the turn's trace id when the request context has one
(:data:`~advisors_app.core.attributes.TRACE_ID`, written to the reply's metadata under
``"trace_id"``), so a transcript read back names the turn of each reply.

A turn refused by a guard (finish reason ``CONTENT_FILTER``, as ``SafeGuardAdvisor`` answers,
for the input or the output) is not stored: the refused text must not come back as history in
later turns (bug case B14); ``AuditAdvisor`` is where refusals are recorded.

Tool calls that wait for approval (``ToolCallingAdvisor``, finish reason ``APPROVAL_REQUIRED``):
the paused reply — the assistant message with the tool calls — is stored with the user input,
flagged ``metadata["approval_pending"]``; being the last stored message, with calls and no tool
response after them, is what makes it pending. A request whose context holds decisions
(``TOOL_CALL_DECISIONS``) resumes it: it carries no new input, the prompt ends with the pending
message, and the tool responses of the decided round (``RESUMED_ROUND``) are stored before the
new reply. A request with a new user message instead answers the pending calls for the model as
not executed (a ``ToolResponseMessage`` flagged ``metadata["not_executed"]``, stored before the
user message), so the history stays valid (Spring AI 2.1 #7369).

Memory advisors belong **outside** the tool loop (default order ``HIGHEST_PRECEDENCE + 200`` <
``ToolCallingAdvisor``'s ``+ 300``): they then run once per user turn and store only the user
input and the final reply (bug case B09).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from ..advisor import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    CallAdvisor,
    MemoryAdvisor,
    StreamAdvisor,
)
from ..aggregation import ChatClientResponseAccumulator
from ..attributes import CONVERSATION_ID, TOOL_CALL_DECISIONS, TRACE_ID, TRACE_ID_METADATA
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..mappings import merged
from ..memory.chat_memory import ChatMemory
from ..memory.ids import (
    APPROVAL_PENDING,
    CANCELLED,
    ERROR,
    FINISH_REASON,
    INTERRUPTED,
    check_conversation_id,
)
from ..memory.turn import turn_memory_of
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponse,
    ToolResponseMessage,
    message_from_dict,
)
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..streams import closing_stream
from .tool_calling import APPROVAL_REQUIRED, RESUMED_ROUND

__all__ = ["NOT_EXECUTED", "BaseChatMemoryAdvisor", "MemoryTurn"]

#: Metadata flag of the tool responses memory adds for calls that were never decided.
NOT_EXECUTED = "not_executed"

logger = logging.getLogger(__name__)

#: The finish reason of a guard's refusal (``SafeGuardAdvisor``): such a turn is not stored.
REFUSED = "CONTENT_FILTER"

# Stores of interrupted turns run as shielded tasks; the loop only keeps weak references.
_pending_stores: set[asyncio.Task[None]] = set()


@dataclass(frozen=True, slots=True)
class MemoryTurn:
    """One user turn as a memory advisor prepared it."""

    conversation_id: str
    #: The merged system message, or ``None`` when neither memory nor request has one.
    system: SystemMessage | None
    #: Stored messages (non-system) the prompt does not already hold, oldest first.
    history: tuple[Message, ...]
    #: The request's non-system messages, in order.
    conversation: tuple[Message, ...]
    #: What will be stored before the reply: the request's messages memory does not hold yet.
    new_input: tuple[Message, ...]
    #: The context's ``TRACE_ID``, written into the stored reply's metadata (``None``: not set).
    trace_id: str | None = None
    #: A resume: the stored message whose decided tool calls this turn runs.
    resumed: AssistantMessage | None = None
    #: The memory the turn reads and stores through: the advisor's, or as the request's
    #: ``TurnMemory`` holds it (``None``: the advisor's).
    chat_memory: ChatMemory | None = None


class BaseChatMemoryAdvisor(CallAdvisor, StreamAdvisor, MemoryAdvisor):
    """Reads a ``ChatMemory`` before the model call and stores the whole turn after it.

    ``chat_memory`` is required (``ValueError("chatMemory cannot be null")``); ``order`` defaults
    to ``DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER``; ``default_conversation_id`` is used when the
    request context has no ``CONVERSATION_ID``. Subclasses implement :meth:`advise_request`,
    which builds the prompt from a :class:`MemoryTurn`.
    """

    DEFAULT_ORDER: ClassVar[int] = DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER
    AFTER_SIDE_EFFECTS: ClassVar[bool] = True

    def __init__(
        self,
        chat_memory: ChatMemory,
        order: int = DEFAULT_ORDER,
        *,
        default_conversation_id: str | None = None,
    ) -> None:
        if chat_memory is None:
            raise ValueError("chatMemory cannot be null")
        if default_conversation_id is not None:
            check_conversation_id(default_conversation_id)
        self.chat_memory = chat_memory
        self._order = order
        self.default_conversation_id = default_conversation_id

    def get_conversation_id(self, context: Mapping[str, Any]) -> str:
        """The turn's conversation id: context ``CONVERSATION_ID``, else the advisor default.

        Raises ``ValueError("conversationId cannot be null")`` when neither is set, and the
        messages of ``check_conversation_id`` for a blank, too long or non-string id.
        """
        if context is None:
            raise ValueError("context cannot be null")
        value = context.get(CONVERSATION_ID)
        return check_conversation_id(self.default_conversation_id if value is None else value)

    def advise_request(self, request: ChatClientRequest, turn: MemoryTurn) -> ChatClientRequest:
        """The request to send on, built from ``turn``."""
        raise NotImplementedError

    async def prepare(self, request: ChatClientRequest) -> tuple[ChatClientRequest, MemoryTurn]:
        """Read the conversation and build the advised request; nothing is stored here."""
        if request is None:
            raise ValueError("chatClientRequest cannot be null")
        conversation_id = self.get_conversation_id(request.context)
        memory = self.chat_memory
        turn_memory = turn_memory_of(request.context, conversation_id)
        if turn_memory is not None:
            memory = memory.for_turn(turn_memory)
        instructions = request.prompt.instructions
        conversation = tuple(m for m in instructions if not isinstance(m, SystemMessage))
        held = await memory.ahistory_for(conversation_id, conversation)
        history = held.history
        pending = _pending_calls(history)
        resumed = None
        new_input: tuple[Message, ...]
        if request.context.get(TOOL_CALL_DECISIONS) is not None:
            new_input, resumed = _checked_resume(held.new, pending), pending
        else:
            new_input = _checked_new_input(held.new)
            if pending is not None and not isinstance(new_input[0], ToolResponseMessage):
                unanswered = _unanswered(pending)
                history, new_input = (*history, unanswered), (unanswered, *new_input)
        systems = [m for m in (*held.system, *instructions) if isinstance(m, SystemMessage)]
        turn = MemoryTurn(
            conversation_id,
            _merge_system(systems),
            history,
            conversation,
            new_input,
            request.context.get(TRACE_ID),
            resumed,
            memory,
        )
        return self.advise_request(request, turn), turn

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        advised, turn = await self.prepare(request)
        response = await chain.next_call(advised)
        await self._store(turn, response.chat_response)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        advised, turn = await self.prepare(request)
        accumulator = ChatClientResponseAccumulator()
        try:
            async with closing_stream(chain.next_stream(advised)) as chunks:
                async for chunk in chunks:
                    accumulator.add(chunk)
                    yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            await self._store_interrupted(turn, accumulator, CANCELLED)
            raise
        except Exception:
            await self._store_interrupted(turn, accumulator, ERROR)
            raise
        await self._store(turn, accumulator.result().chat_response)

    async def _store(self, turn: MemoryTurn, response: ChatResponse | None) -> None:
        """Store the completed turn: its new input, the tool responses of a resumed round,
        the reply (flagged pending when its calls wait for approval)."""
        reply = _traced(_reply(response), turn)
        if reply is None:
            return
        assert response is not None
        if response.generations[0].finish_reason == APPROVAL_REQUIRED and reply.tool_calls:
            reply = replace(reply, metadata=merged(reply.metadata, {APPROVAL_PENDING: True}))
        resumed = [
            message
            for message in map(message_from_dict, response.metadata.get(RESUMED_ROUND) or ())
            if isinstance(message, ToolResponseMessage)
        ]
        memory = turn.chat_memory or self.chat_memory
        await memory.aadd(turn.conversation_id, [*turn.new_input, *resumed, reply])

    async def _store_interrupted(
        self, turn: MemoryTurn, accumulator: ChatClientResponseAccumulator, reason: str
    ) -> None:
        """Store the partial turn, shielded from a second cancel; never raises. A resume
        stores its calls' answers even without a reply, so no call is left without one."""
        reply = _traced(_partial_reply(accumulator.result().chat_response, reason), turn)
        messages: list[Message] = [*turn.new_input]
        if turn.resumed is not None:
            messages.append(_unanswered(turn.resumed, recorded=False))
        elif reply is None:
            return
        if reply is not None:
            messages.append(reply)
        memory = turn.chat_memory or self.chat_memory
        task = asyncio.ensure_future(memory.aadd(turn.conversation_id, messages))
        _pending_stores.add(task)
        task.add_done_callback(_stored)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            pass  # the shielded task still finishes; the caller re-raises its own exception
        except Exception:
            pass  # already logged by _stored; the original exception matters more


def _stored(task: asyncio.Task[None]) -> None:
    _pending_stores.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.error("could not store an interrupted chat-memory turn", exc_info=task.exception())


def _checked_new_input(new: tuple[Message, ...]) -> tuple[Message, ...]:
    """``new`` if the request ends with new input (a user message or a tool response)."""
    if not new or isinstance(new[-1], AssistantMessage):
        raise ValueError(
            "the prompt has no new user message for chat memory: after the last assistant "
            "message it needs a non-blank user message or a tool response that memory does "
            "not hold yet"
        )
    return new


def _pending_calls(history: Sequence[Message]) -> AssistantMessage | None:
    """The stored message whose tool calls wait for a decision: the last one, when it is an
    assistant message with tool calls (``None``: nothing waits)."""
    last = history[-1] if history else None
    if isinstance(last, AssistantMessage) and last.tool_calls:
        return last
    return None


def _checked_resume(
    new: tuple[Message, ...], pending: AssistantMessage | None
) -> tuple[Message, ...]:
    """No new input: a resume adds only the decided round and the reply."""
    if pending is None:
        raise ValueError(
            "the request holds tool-call decisions but the conversation has no tool calls "
            "waiting for them"
        )
    if new:
        raise ValueError(
            "a request that resumes paused tool calls with decisions must not carry new "
            "messages: send the decisions alone"
        )
    return ()


def _unanswered(pending: AssistantMessage, *, recorded: bool = True) -> ToolResponseMessage:
    """The answers the model reads for calls left without a result: never decided (Spring AI
    2.1 #7369), or decided by a turn that ended before their results were stored
    (``recorded=False``, or a stored message no longer flagged ``approval_pending``)."""
    decided = not recorded or pending.metadata.get(APPROVAL_PENDING) is False
    answers = []
    for call in pending.tool_calls:
        if decided:
            text = (
                f"No result was recorded for the call to tool '{call.name}': the turn that "
                "ran its decision ended early."
            )
        else:
            text = (
                f"The call to tool '{call.name}' was not executed: the user sent a new message "
                "instead of deciding on it."
            )
        answers.append(ToolResponse(call.id, call.name, text))
    return ToolResponseMessage(tuple(answers), {NOT_EXECUTED: True})


def _merge_system(systems: Sequence[SystemMessage]) -> SystemMessage | None:
    distinct: list[SystemMessage] = []
    for message in systems:
        if message not in distinct:
            distinct.append(message)
    if len(distinct) <= 1:
        return distinct[0] if distinct else None
    metadata = distinct[0].metadata
    for message in distinct[1:]:
        metadata = merged(metadata, message.metadata)
    return SystemMessage("\n\n".join(m.text for m in distinct), metadata)


def _reply(response: ChatResponse | None) -> AssistantMessage | None:
    """The reply to store: the first generation's message (``None``: none, or a refusal)."""
    if response is None or not response.generations:
        return None
    if response.generations[0].finish_reason == REFUSED:
        return None
    return response.generations[0].output


def _partial_reply(response: ChatResponse | None, reason: str) -> AssistantMessage | None:
    reply = _reply(response)
    if reply is None or not reply.text.strip():
        return None
    return AssistantMessage(
        reply.text, merged(reply.metadata, {INTERRUPTED: True, FINISH_REASON: reason})
    )


def _traced(reply: AssistantMessage | None, turn: MemoryTurn) -> AssistantMessage | None:
    """``reply`` with the turn's trace id in its metadata (unchanged without one)."""
    if reply is None or turn.trace_id is None:
        return reply
    return replace(reply, metadata=merged(reply.metadata, {TRACE_ID_METADATA: turn.trace_id}))
