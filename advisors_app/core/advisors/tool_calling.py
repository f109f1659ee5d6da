"""``ToolCallingAdvisor``: the tool-calling loop as an advisor (Spring AI ``ToolCallingAdvisor``).

Seed §6.7, reference §3.12. Each round sends the prompt down the rest of the chain
(``chain.copy(self)``, so every advisor inside the loop runs once per round), runs the tool
calls of the answer with the ``ToolCallingManager`` and sends the results back, until the model
answers without tool calls, every tool invoked is return-direct, or a tool-call limit is
breached (then the breach comes back as a generation with finish reason
``"toolCallLimitExceeded"``, not as an exception), or calls of a reply need a person's approval.

Approval (Spring AI 2.1 tool-call confirmation; see ``advisors_app.core.tools.approval``): when
the manager's confirmation policy says calls of a reply need approval, no call of the reply runs
and the turn ends — in call and in stream — with one generation that is the model's tool-call
message, finish reason :data:`APPROVAL_REQUIRED`, and the pending calls in the response metadata
under :data:`PENDING_APPROVALS` (a tuple of ``PendingToolCall.to_dict()``). The loop keeps
nothing. To resume, send a request whose prompt messages, as they reach the loop, end with that
tool-call message (loaded from the stored conversation) and whose context holds
``TOOL_CALL_DECISIONS`` (``advisors_app.core.attributes``), one ``ToolCallDecision`` per pending
call: the loop runs that message's calls as decided, then calls the model with the results and
goes on (it may pause again); its final response carries the decided round under
:data:`RESUMED_ROUND`. ``TOOL_APPROVAL_GRANTS`` names tools that need no approval in the request.

Guard rails (``advisors_app.core.guards.rails``): with a guard session in the request context,
the calls of each reply pass its ``tool_arguments`` rail before they run (on a resume, with the
reviewer's edits applied; ``hold`` pauses the reply as a call that needs approval does) and
their results its ``tool_results`` rail before the model (or, return-direct, the user) reads
them; a ``block`` raises ``GuardBlockedError`` for the guard to answer.
"""

from __future__ import annotations

import inspect
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any, ClassVar

from ..advisor import (
    DEFAULT_TOOL_CALLING_ORDER,
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    CallAdvisor,
    StreamAdvisor,
    ToolAdvisor,
)
from ..aggregation import ChatClientResponseAccumulator
from ..attributes import CONVERSATION_ID, PRINCIPAL, TOOL_APPROVAL_GRANTS, TOOL_CALL_DECISIONS
from ..chain import CallAdvisorChain, StreamAdvisorChain
from ..exceptions import ToolCallLimitExceededError
from ..guards.rails import screen_tool_results, screen_tool_round
from ..mappings import freeze
from ..messages import AssistantMessage, Message, SystemMessage, ToolResponseMessage
from ..observation import tool_call_observer
from ..prompt import Prompt, ToolCallingChatOptions
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatGenerationMetadata, ChatResponse, ChatResponseMetadata, Generation
from ..streams import closing_stream
from ..tools.approval import ToolApprovalRequiredError, ToolCallDecisionError
from ..tools.manager import ToolCallingManager, ToolExecutionResult
from ..usage import UsageAccumulator

__all__ = [
    "APPROVAL_REQUIRED",
    "PENDING_APPROVALS",
    "RESUMED_ROUND",
    "ROUND_USAGES",
    "ToolCallingAdvisor",
    "ToolExecutionEligibilityChecker",
]

#: Response-metadata key: each round's usage (``Usage.to_dict()`` or ``None``), in order (B12).
ROUND_USAGES = "tool_calling_round_usages"

#: Finish reason of a turn paused until calls are approved.
APPROVAL_REQUIRED = ToolApprovalRequiredError.FINISH_REASON

#: Response-metadata key of a paused turn: its pending calls, a tuple of
#: ``{"approval_id", "tool", "arguments", "allowed_decisions", "reason"}`` dicts in call order.
PENDING_APPROVALS = "pending_approvals"

#: Response-metadata key of a resumed turn's final response (in streams: its last chunk): the
#: round the decisions ran, as ``Message.to_dict()`` dicts — the assistant tool-call message as
#: run (edited arguments included) and the ``ToolResponseMessage`` — for whoever stores the
#: conversation (the paused message's answers).
RESUMED_ROUND = "tool_calling_resumed_round"

ToolExecutionEligibilityChecker = Callable[[ChatResponse | None], bool]

_DEFAULT_MANAGER = ToolCallingManager()

#: Request-context keys a tool finds in its ``ToolContext``: who the turn is for, and its
#: conversation.
_SHARED_WITH_TOOLS = (PRINCIPAL, CONVERSATION_ID)

#: The keywords ``ToolCallingManager.execute_tool_calls`` gained for approvals (issue 19).
_APPROVAL_KEYWORDS = frozenset({"decisions", "granted"})


def _execute_parameters(execute: Callable[..., Any]) -> tuple[bool, frozenset[str]]:
    """Whether a manager's ``execute_tool_calls`` takes the observer (a third positional
    argument) and which of :data:`_APPROVAL_KEYWORDS` it takes.

    Managers written against earlier releases override ``execute_tool_calls(prompt,
    chat_response)`` (issue 35): the loop passes each of them only what it takes.
    """
    try:
        parameters = list(inspect.signature(execute).parameters.values())
    except (TypeError, ValueError):
        # No signature to read (a C callable): assume the current one.
        return True, _APPROVAL_KEYWORDS
    kinds = {parameter.kind for parameter in parameters}
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    takes_observer = len(positional) >= 3 or inspect.Parameter.VAR_POSITIONAL in kinds
    if inspect.Parameter.VAR_KEYWORD in kinds:
        return takes_observer, _APPROVAL_KEYWORDS
    named = {
        p.name
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    return takes_observer, _APPROVAL_KEYWORDS & named


def _has_tool_calls(response: ChatResponse | None) -> bool:
    return response is not None and response.has_tool_calls()


def _without_usage(chunk: ChatClientResponse) -> ChatClientResponse:
    response = chunk.chat_response
    if response is None or response.metadata.usage is None:
        return chunk
    return chunk.mutate(chat_response=response.with_usage(None))


def _chunk_has_tool_calls(chunk: ChatClientResponse) -> bool:
    return chunk.chat_response is not None and chunk.chat_response.has_tool_calls()


def _chunk_has_text(chunk: ChatClientResponse) -> bool:
    response = chunk.chat_response
    return response is not None and any(g.output.text for g in response.generations)


#: How a streamed round's text is released (see ``ToolCallingAdvisor``).
ROUND_STREAMING_MODES = ("first_content", "hold", "eager")


class ToolCallingAdvisor(CallAdvisor, StreamAdvisor, ToolAdvisor):
    """The recursive tool loop; the one ``ToolAdvisor`` of a chain.

    ``tool_calling_manager`` runs the calls (default: a shared ``ToolCallingManager()``); an
    override of its ``execute_tool_calls`` may keep an earlier signature,
    ``(prompt, chat_response)`` or ``(prompt, chat_response, observer)``: it gets only the
    arguments it takes, and a ``TypeError`` naming its class when resuming a paused reply needs
    the ``decisions`` keyword it lacks;
    ``tool_execution_eligibility_checker(chat_response) -> bool`` decides whether a response is
    a tool-call round (default: it has tool calls); ``conversation_history_enabled=False`` sends
    each next round only the system message and the latest tool responses, for a memory advisor
    inside the loop that supplies the rest. ``order`` must lie strictly between
    ``HIGHEST_PRECEDENCE`` and ``LOWEST_PRECEDENCE`` (``ValueError`` otherwise).

    Requests whose options are not ``ToolCallingChatOptions``, or that set
    ``internal_tool_execution_enabled=False`` (the caller runs the tools), pass through. Tool
    names in the options are resolved to callbacks once per turn, so models only read
    ``tool_callbacks``. Usage is summed over the rounds (B12); each round's figure is in the
    response metadata under :data:`ROUND_USAGES`.

    Subclasses extend the loop through the ``do_*`` hooks (all ``async`` except
    ``do_finalize_loop_stream``), as Spring AI's protected methods.

    Streams: tool-call chunks never reach the client. ``round_streaming`` decides what happens
    to a round's text, since whether a round is a tool round is only certain when it ends:

    * ``"first_content"`` (default): the round's first chunk with content decides. Tool calls
      first → the round is held and dropped; text first → the round streams as it arrives.
      Providers send tool calls before any text (OpenAI, the embedded model's emulation), so
      answers stream token by token and tool rounds stay invisible; only a text preamble that a
      model writes *before* a tool call (some hosted models do) reaches the client, as in
      Spring AI;
    * ``"hold"``: every round is held until it ends and released only if it is the final
      answer — no preamble ever leaks (fix for defect 5.4.26), at the price of the answer
      arriving in one burst;
    * ``"eager"``: text is forwarded as it comes, as in Spring AI.

    Forwarded chunks carry no usage; one trailing
    chunk without generations carries the whole turn's usage and the round figures, so the
    aggregate a consumer builds has the turn's total. A return-direct or limit-breach ending is
    one chunk with the accumulated usage.

    Other divergences, each a fix: with history disabled no empty ``SystemMessage("")`` is
    injected when the prompt has none (defect 5.4.27); the loop's position is immutable, so a
    chain copy per round is cheap; messages that an override of
    ``do_get_next_instructions_for_tool_call`` adds (feedback for the model, say) join the turn's
    history after the round's tool responses, so every later round and the tool-call limits see
    them, in call and stream (Spring AI #6842: in 2.0.1 they were lost after the next tool call,
    on the streaming path).
    """

    DEFAULT_ORDER: ClassVar[int] = DEFAULT_TOOL_CALLING_ORDER

    def __init__(
        self,
        tool_calling_manager: ToolCallingManager | None = None,
        tool_execution_eligibility_checker: ToolExecutionEligibilityChecker | None = None,
        conversation_history_enabled: bool = True,
        order: int = DEFAULT_ORDER,
        *,
        round_streaming: str = "first_content",
    ) -> None:
        if not HIGHEST_PRECEDENCE < order < LOWEST_PRECEDENCE:
            raise ValueError(
                "advisorOrder must be between HIGHEST_PRECEDENCE and LOWEST_PRECEDENCE, "
                f"got {order}"
            )
        self._manager = tool_calling_manager or _DEFAULT_MANAGER
        self._manager_takes_observer, self._manager_keywords = _execute_parameters(
            self._manager.execute_tool_calls
        )
        self._checker = tool_execution_eligibility_checker or _has_tool_calls
        self._history = conversation_history_enabled
        self._order = order
        if round_streaming not in ROUND_STREAMING_MODES:
            raise ValueError(
                f"round_streaming must be one of {', '.join(ROUND_STREAMING_MODES)}, "
                f"got {round_streaming!r}"
            )
        self._round_streaming = round_streaming

    @property
    def name(self) -> str:
        return "Tool Calling Advisor"

    @property
    def tool_calling_manager(self) -> ToolCallingManager:
        return self._manager

    @property
    def conversation_history_enabled(self) -> bool:
        return self._history

    # -- hooks (Spring AI's protected methods) -------------------------------------------------

    async def do_initialize_loop(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        """Runs once per turn before the first round; returns the request the loop starts from."""
        return request

    async def do_before_call(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        """Runs before each round; the options it returns are the ones the tools resolve from."""
        return request

    async def do_after_call(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        """Runs after each round (in streams: on the round's aggregate)."""
        return response

    async def do_finalize_loop(
        self, response: ChatClientResponse, chain: Any
    ) -> ChatClientResponse:
        """Runs once on the final response of a call."""
        return response

    def do_finalize_loop_stream(
        self, stream: AsyncIterator[ChatClientResponse], chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        """Wraps the stream of chunks the client receives (default: unchanged)."""
        return stream

    async def do_get_next_instructions_for_tool_call(
        self,
        request: ChatClientRequest,
        response: ChatClientResponse,
        result: ToolExecutionResult,
    ) -> tuple[Message, ...]:
        """The messages of the next round: the whole history, or with history disabled the
        request's first system message (if any) and the last history message."""
        history = result.conversation_history
        if self._history or not history:
            return history
        system = next(
            (m for m in request.prompt.instructions if isinstance(m, SystemMessage)), None
        )
        return (history[-1],) if system is None else (system, history[-1])

    # -- the loop ------------------------------------------------------------------------------

    def _loop_applies(self, request: ChatClientRequest) -> bool:
        options = request.prompt.options
        return (
            isinstance(options, ToolCallingChatOptions)
            and options.internal_tool_execution_enabled is not False
        )

    def _with_resolved_tools(self, request: ChatClientRequest) -> ChatClientRequest:
        options = request.prompt.options
        if not isinstance(options, ToolCallingChatOptions) or not options.tool_names:
            return request
        callbacks = self._manager.resolve_tool_callbacks(options)
        resolved = options.mutate(tool_callbacks=callbacks, tool_names=())
        return request.mutate(prompt=request.prompt.mutate(options=resolved))

    async def _start(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        return await self.do_initialize_loop(self._with_resolved_tools(request), chain)

    async def _execute(
        self,
        options: Any,
        history: tuple[Message, ...],
        response: ChatClientResponse,
        chain: Any,
        *,
        decisions: Any = None,
    ) -> tuple[ToolExecutionResult | None, ChatClientResponse | None, tuple[Message, ...]]:
        """Run a tool round: ``(result, None, ran)`` to go on, ``(None, final, ran)`` to stop.

        ``ran`` is the round's assistant message as run and its ``ToolResponseMessage`` (empty
        on a pause). The chain's observer, if it watches tool calls, is told about each call.
        """
        chat_response = response.chat_response
        assert chat_response is not None  # the eligibility checker saw a tool call
        observer = tool_call_observer(getattr(chain, "observer", None))
        granted = frozenset(response.context.get(TOOL_APPROVAL_GRANTS) or ())
        shared = {k: response.context[k] for k in _SHARED_WITH_TOOLS if k in response.context}
        if shared and isinstance(options, ToolCallingChatOptions):
            # Tools learn who the turn is for and its conversation from their ToolContext, as
            # stores do from the request context.
            options = options.mutate(tool_context={**options.tool_context, **shared})
        # Each argument added to execute_tool_calls since it was (prompt, chat_response) goes
        # only to an override that takes it, so managers written before it keep working; the
        # approval inputs go only when there are some. Decisions cannot be dropped (the paused
        # calls would pause again, or run although rejected), so an override that cannot take
        # them fails before anything runs; routing them past the override instead would skip
        # what it adds to every round. Grants it cannot take are left out: a granted call then
        # pauses like any other (never running unapproved), and its resume fails as above.
        arguments: tuple[Any, ...] = (Prompt(history, options), chat_response)
        if self._manager_takes_observer:
            arguments = (*arguments, observer)
        keywords: dict[str, Any] = {}
        if granted and "granted" in self._manager_keywords:
            keywords["granted"] = granted
        if decisions is not None:
            if "decisions" not in self._manager_keywords:
                raise TypeError(
                    f"{type(self._manager).__qualname__}.execute_tool_calls() cannot take the "
                    "decisions of a paused reply: add the keyword parameters "
                    "`*, decisions=None, granted=()` to it and pass them on to "
                    "super().execute_tool_calls()"
                )
            keywords["decisions"] = decisions
        # The guard's tool_arguments rail, on the calls as they would run (a reviewer's edits
        # applied): arguments redacted, the reply held for approval, or the turn blocked.
        screened = await screen_tool_round(
            response.context, self._manager, options, chat_response, decisions, granted
        )
        if screened.held:
            pause = ToolApprovalRequiredError(screened.held, history)
            return None, _paused(response, pause), ()
        if screened.chat_response is not chat_response:
            chat_response = screened.chat_response
            arguments = (arguments[0], chat_response, *arguments[2:])
            if decisions is not None:
                keywords["decisions"] = screened.decisions
        try:
            result = await self._manager.execute_tool_calls(*arguments, **keywords)
        except ToolCallLimitExceededError as breach:
            final = _with_generations(response, (breach.build_generation(),))
            return None, final, breach.partial_history[-2:]
        except ToolApprovalRequiredError as pause:
            return None, _paused(response, pause), ()
        result = await _screened_results(response.context, result)
        ran = result.conversation_history[-2:]
        if result.return_direct:
            generations = ToolExecutionResult.build_generations(result)
            return None, _with_generations(response, generations), ran
        return result, None, ran

    async def _next_round(
        self, request: ChatClientRequest, response: ChatClientResponse, result: ToolExecutionResult
    ) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
        """The turn's history and the next round's messages after a tool round.

        Messages the hook adds to what the default would send (#6842) join the history after
        the round's tool responses, so later rounds and the limits see them.
        """
        instructions = await self.do_get_next_instructions_for_tool_call(request, response, result)
        default = await ToolCallingAdvisor.do_get_next_instructions_for_tool_call(
            self, request, response, result
        )
        return (*result.conversation_history, *_added(default, instructions)), instructions

    async def _resume(
        self, request: ChatClientRequest, chain: Any
    ) -> (
        tuple[tuple[Message, ...], tuple[Message, ...], tuple[Message, ...]]
        | ChatClientResponse
        | None
    ):
        """Run the decided calls of a paused reply before the first round.

        ``None`` when the context holds no decisions; else the history, the next instructions
        and the round that ran (assistant message as run, tool responses), or the final
        response (return-direct or a limit breach; it carries :data:`RESUMED_ROUND`). Raises
        ``ToolCallDecisionError`` when the prompt does not end with a tool-call message.
        """
        decisions = request.context.get(TOOL_CALL_DECISIONS)
        if decisions is None:
            return None
        history = request.prompt.instructions
        last = history[-1] if history else None
        if not isinstance(last, AssistantMessage) or not last.tool_calls:
            raise ToolCallDecisionError(
                f"context key {TOOL_CALL_DECISIONS!r} holds decisions but the prompt's messages "
                "do not end with the assistant message whose tool calls await them (is the "
                "conversation's memory advisor ordered before the tool-calling advisor?)"
            )
        paused = ChatClientResponse(
            ChatResponse((Generation(last, ChatGenerationMetadata(APPROVAL_REQUIRED)),)),
            request.context,
        )
        result, final, ran = await self._execute(
            request.prompt.options, history[:-1], paused, chain, decisions=decisions
        )
        if result is None:
            assert final is not None
            return _with_resumed_round(final, ran)
        return (*await self._next_round(request, paused, result), ran)

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        if chain is None:
            raise ValueError("callAdvisorChain must not be null")
        if request is None:
            raise ValueError("chatClientRequest must not be null")
        if not self._loop_applies(request):
            return await chain.next_call(request)
        request = await self._start(request, chain)
        downstream = chain.copy(self)
        options = request.prompt.options
        instructions = history = request.prompt.instructions
        usage = UsageAccumulator()
        resumed = await self._resume(request, chain)
        if isinstance(resumed, ChatClientResponse):
            return await self.do_finalize_loop(resumed, chain)
        resumed_round: tuple[Message, ...] = ()
        if resumed is not None:
            history, instructions, resumed_round = resumed
        while True:
            processed = await self.do_before_call(
                request.mutate(prompt=Prompt(instructions, options)), chain
            )
            options = processed.prompt.options
            response = await self.do_after_call(await downstream.next_call(processed), chain)
            usage.add_round_response(response)
            if not self._checker(response.chat_response):
                break
            result, final, _ = await self._execute(options, history, response, chain)
            if result is None:
                assert final is not None
                response = final
                break
            history, instructions = await self._next_round(processed, response, result)
        response = _with_resumed_round(_stamp_usage(response, usage), resumed_round)
        return await self.do_finalize_loop(response, chain)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        if request is None:
            raise ValueError("chatClientRequest must not be null")
        if not self._loop_applies(request):
            async with closing_stream(chain.next_stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        request = await self._start(request, chain)
        stream = self.do_finalize_loop_stream(self._stream_rounds(request, chain), chain)
        async with closing_stream(stream) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _stream_rounds(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        downstream = chain.copy(self)
        options = request.prompt.options
        instructions = history = request.prompt.instructions
        usage = UsageAccumulator()
        resumed = await self._resume(request, chain)
        if isinstance(resumed, ChatClientResponse):
            yield resumed
            return
        resumed_round: tuple[Message, ...] = ()
        if resumed is not None:
            history, instructions, resumed_round = resumed
        while True:
            processed = await self.do_before_call(
                request.mutate(prompt=Prompt(instructions, options)), chain
            )
            options = processed.prompt.options
            accumulator = ChatClientResponseAccumulator()
            streamed_text = False
            held: list[ChatClientResponse] = []
            forward = self._round_streaming == "eager"
            decided = self._round_streaming != "first_content"
            async with closing_stream(downstream.next_stream(processed)) as chunks:
                async for chunk in chunks:
                    accumulator.add(chunk)
                    has_tool_calls = _chunk_has_tool_calls(chunk)
                    if not decided and (has_tool_calls or _chunk_has_text(chunk)):
                        decided, forward = True, not has_tool_calls
                    if forward and not has_tool_calls:
                        for earlier in held:
                            yield _without_usage(earlier)
                        held.clear()
                        streamed_text = True
                        yield _without_usage(chunk)
                    else:
                        held.append(chunk)
            response = await self.do_after_call(accumulator.result(), chain)
            usage.add_round_response(response)
            if not self._checker(response.chat_response):
                for chunk in held:
                    yield _without_usage(chunk)
                trailer = _usage_trailer(response, usage)
                if trailer is not None:
                    yield _with_resumed_round(trailer, resumed_round)
                return
            result, final, _ = await self._execute(options, history, response, chain)
            if result is None:
                assert final is not None
                if streamed_text and _is_paused(final):
                    # The client already has this round's text; the pause chunk adds the calls.
                    final = _without_text(final)
                yield _with_resumed_round(_stamp_usage(final, usage), resumed_round)
                return
            history, instructions = await self._next_round(processed, response, result)


async def _screened_results(context: Any, result: ToolExecutionResult) -> ToolExecutionResult:
    """``result`` with its round's tool responses through the guard's tool_results rail."""
    *earlier, last = result.conversation_history
    if not isinstance(last, ToolResponseMessage):
        return result
    screened = await screen_tool_results(context, last)
    if screened is last:
        return result
    return replace(result, conversation_history=(*earlier, screened))


def _added(default: tuple[Message, ...], instructions: tuple[Message, ...]) -> list[Message]:
    """The messages of ``instructions`` beyond those of ``default``, in their order.

    Counted as multisets (a message added twice is kept twice); messages the hook only drops or
    reorders add nothing.
    """
    if instructions == default:
        return []
    extra = Counter(instructions)
    extra.subtract(default)
    added = []
    for message in instructions:
        if extra[message] > 0:
            extra[message] -= 1
            added.append(message)
    return added


def _with_generations(
    response: ChatClientResponse, generations: tuple[Generation, ...]
) -> ChatClientResponse:
    chat_response = response.chat_response
    assert chat_response is not None
    return response.mutate(chat_response=chat_response.mutate(generations=generations))


def _paused(response: ChatClientResponse, pause: ToolApprovalRequiredError) -> ChatClientResponse:
    """The round's tool-call generation with finish reason ``APPROVAL_REQUIRED`` and the
    pending calls in the response metadata."""
    chat_response = response.chat_response
    assert chat_response is not None
    generation = next(g for g in chat_response.generations if g.output.tool_calls)
    paused = Generation(
        generation.output,
        ChatGenerationMetadata(APPROVAL_REQUIRED, generation.metadata.extra),
    )
    pending = tuple(p.to_dict() for p in pause.pending)
    return response.mutate(
        chat_response=chat_response.mutate(generations=(paused,)).with_metadata(
            **{PENDING_APPROVALS: pending}
        )
    )


def _with_resumed_round(
    response: ChatClientResponse, ran: tuple[Message, ...]
) -> ChatClientResponse:
    chat_response = response.chat_response
    if not ran or chat_response is None:
        return response
    entry = tuple(message.to_dict() for message in ran)
    return response.mutate(chat_response=chat_response.with_metadata(**{RESUMED_ROUND: entry}))


def _is_paused(response: ChatClientResponse) -> bool:
    chat_response = response.chat_response
    return chat_response is not None and chat_response.has_finish_reasons(APPROVAL_REQUIRED)


def _without_text(response: ChatClientResponse) -> ChatClientResponse:
    chat_response = response.chat_response
    assert chat_response is not None
    generations = tuple(
        Generation(
            AssistantMessage("", g.output.metadata, g.output.tool_calls),
            g.metadata,
        )
        for g in chat_response.generations
    )
    return response.mutate(chat_response=chat_response.mutate(generations=generations))


def _round_figures(usage: UsageAccumulator) -> tuple[dict[str, Any] | None, ...]:
    return tuple(u.to_dict() if u is not None else None for u in usage.round_usages)


def _stamp_usage(response: ChatClientResponse, usage: UsageAccumulator) -> ChatClientResponse:
    response = usage.apply_accumulated_usage(response)
    chat_response = response.chat_response
    if chat_response is None:
        return response
    return response.mutate(
        chat_response=chat_response.with_metadata(**{ROUND_USAGES: _round_figures(usage)})
    )


def _usage_trailer(
    response: ChatClientResponse, usage: UsageAccumulator
) -> ChatClientResponse | None:
    if not usage.round_usages:
        return None
    metadata = ChatResponseMetadata(
        usage=usage.accumulated_usage, extra=freeze({ROUND_USAGES: _round_figures(usage)})
    )
    return ChatClientResponse(ChatResponse((), metadata), response.context)
