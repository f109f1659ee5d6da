"""Running the tool calls of a model response (Spring AI ``DefaultToolCallingManager``).

One round: the first generation that requests tool calls is executed, the calls of the round run
**concurrently** and their responses come back in the model's call order. Limits count the calls
of the current *turn* (from the last user message on) by tool response: per tool (default 40),
in total (default 150) and, a divergence, per identical call (same tool, same canonical JSON
arguments; default 3) so that a model repeating itself is stopped (bug case B26, spring-ai
#5754 / PR #6462). With ``ToolCallLimitBehavior.THROW`` a breach raises
:class:`~advisors_app.core.exceptions.ToolCallLimitExceededError` after the calls before it in
the round have run; with ``RETURN_ERROR_RESPONSE`` the breaching call is skipped and the model
gets the breach text as its response.

Divergences from Spring AI, each a fix:

* an identical-call breach always ends the turn (THROW), whatever the behaviour: a looping model
  told it is looping loops again (B26);
* under ``RETURN_ERROR_RESPONSE`` a model that calls again after being told a limit is reached
  ends the turn the same way, so the loop always terminates (Spring loops until the model obeys);
* a tool that fails (bad arguments or an exception) sends the error text to the model as its
  response, and a failed call never counts as return-direct (the model can recover);
* a tool name the model made up gets ``"No ToolCallback found for tool name: <name>"`` as its
  response instead of failing the request (Spring raises ``IllegalStateException``).

Approval (Spring AI 2.1 tool-call confirmation, :mod:`.approval`): before any call of a reply
runs, the ``confirmation_policy`` is asked about each; if one needs approval, nothing runs and
:class:`~.approval.ToolApprovalRequiredError` is raised. Called again with ``decisions`` for that
reply, approved calls run, edited ones run with the new arguments (the assistant message in the
returned history carries them, so the model sees what ran) and rejected ones get the rejection
as their response (a limit never refuses them); the limits apply to the rest as usual.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, ClassVar

from ..exceptions import AdvisorStateError, ToolCallLimitExceededError
from ..mappings import freeze
from ..messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..observation import ToolCallObserver
from ..prompt import ChatOptions, Prompt, ToolCallingChatOptions
from ..response import ChatGenerationMetadata, ChatResponse, Generation
from .approval import (
    ALL_DECISIONS,
    ApprovalDecision,
    PendingToolCall,
    ToolApprovalRequiredError,
    ToolCallConfirmationPolicy,
    ToolCallDecision,
    ToolCallDecisionError,
    index_decisions,
    parse_arguments,
)
from .callback import ToolArgumentsError, ToolCallback, ToolDefinition
from .registry import ToolRegistry

__all__ = [
    "ExceptionProcessor",
    "ToolCallLimitBehavior",
    "ToolCallingManager",
    "ToolExecutionResult",
    "canonical_arguments",
]

logger = logging.getLogger(__name__)

ExceptionProcessor = Callable[[ToolCall, BaseException], str]


class ToolCallLimitBehavior(StrEnum):
    """What a per-tool or total limit breach does (Spring AI ``ToolCallLimitBehavior``)."""

    THROW = "THROW"
    RETURN_ERROR_RESPONSE = "RETURN_ERROR_RESPONSE"


@dataclass(frozen=True, slots=True)
class ToolExecutionResult:
    """The outcome of one round: the turn's history and whether to return the results directly.

    ``conversation_history`` is the prompt's messages, the assistant message with the tool calls
    and the ``ToolResponseMessage`` of the round. ``return_direct`` is ``True`` when every tool
    that ran is return-direct and none failed.
    """

    conversation_history: tuple[Message, ...]
    return_direct: bool = False

    FINISH_REASON: ClassVar[str] = "returnDirect"
    METADATA_TOOL_ID: ClassVar[str] = "toolId"
    METADATA_TOOL_NAME: ClassVar[str] = "toolName"

    @staticmethod
    def build_generations(result: ToolExecutionResult) -> tuple[Generation, ...]:
        """One generation per tool response of the last round, in call order.

        Text is the response data; message metadata holds ``toolId`` and ``toolName``; the
        finish reason is ``"returnDirect"``.
        """
        last = result.conversation_history[-1] if result.conversation_history else None
        if not isinstance(last, ToolResponseMessage):
            return ()
        return tuple(
            Generation(
                AssistantMessage(
                    r.response_data,
                    freeze(
                        {
                            ToolExecutionResult.METADATA_TOOL_ID: r.id,
                            ToolExecutionResult.METADATA_TOOL_NAME: r.name,
                        }
                    ),
                ),
                ChatGenerationMetadata(ToolExecutionResult.FINISH_REASON),
            )
            for r in last.responses
        )


def canonical_arguments(arguments: str) -> str:
    """Arguments as canonical JSON (sorted keys, no spaces); blank is ``{}``, bad JSON stripped."""
    text = arguments.strip() or "{}"
    try:
        return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return text


def _expected(error: BaseException) -> bool:
    """Whether a tool's failure is an outcome its environment produces routinely — a timeout,
    or an exception class marked ``expected_tool_error = True`` (an MCP server's error result,
    an unreachable server) — logged as one line: a traceback would only show the tool loop."""
    return isinstance(error, TimeoutError) or bool(getattr(error, "expected_tool_error", False))


def default_exception_processor(call: ToolCall, error: BaseException) -> str:
    """The text a failed call sends to the model: the validation problems or the exception."""
    if isinstance(error, ToolArgumentsError):
        return str(error)
    detail = str(error) or type(error).__name__
    return f"Error executing tool '{call.name}': {detail}"


def _tool_limit_text(limit: int, name: str) -> str:
    return (
        f"Tool call limit ({limit}) exceeded for tool '{name}'. "
        "No further calls to this tool are allowed in this turn."
    )


def _total_limit_text(limit: int) -> str:
    return (
        f"Total tool call limit ({limit}) exceeded for this turn. "
        "No further tool calls are allowed."
    )


def _identical_limit_text(limit: int, name: str) -> str:
    return (
        f"Identical tool call limit ({limit}) exceeded for tool '{name}': the same call with "
        "the same arguments was already made in this turn. Do not repeat it."
    )


@dataclass(slots=True)
class _Breach:
    kind: str
    limit: int
    tool_name: str | None
    text: str
    message: str


class _TurnCounts:
    """Calls made so far in the turn: per tool, in total, per identical call, breach texts."""

    __slots__ = ("identical", "per_tool", "responses", "total")

    def __init__(self, history: Sequence[Message]) -> None:
        start = 0
        for i in range(len(history) - 1, -1, -1):
            if isinstance(history[i], UserMessage):
                start = i
                break
        keys: dict[str, str] = {}
        self.per_tool: Counter[str] = Counter()
        self.identical: Counter[tuple[str, str]] = Counter()
        self.responses: Counter[str] = Counter()
        self.total = 0
        for message in history[start:]:
            if isinstance(message, AssistantMessage):
                for call in message.tool_calls:
                    keys[call.id] = canonical_arguments(call.arguments)
            elif isinstance(message, ToolResponseMessage):
                for response in message.responses:
                    self.per_tool[response.name] += 1
                    self.total += 1
                    self.responses[response.response_data] += 1
                    if response.id in keys:
                        self.identical[(response.name, keys[response.id])] += 1


def _refused(call: ToolCall, text: str, observer: ToolCallObserver | None) -> ToolResponse:
    """The response of a call that does not run (a limit, an unknown tool), told to
    ``observer`` as a call that failed at once."""
    if observer is not None:
        observer.tool_call_started(call)
        observer.tool_call_finished(call, False, text, 0.0)
    return ToolResponse(call.id, call.name, text)


class ToolCallingManager:
    """Resolves tools and runs the tool calls of a response, within per-turn limits.

    ``max_calls_per_tool`` (40) and ``max_total_tool_calls`` (150) are Spring AI's defaults;
    ``max_identical_calls`` (3, ``None`` to disable) caps repeats of one call;
    ``limit_behavior`` is :class:`ToolCallLimitBehavior`; ``excluded_from_limit`` names tools
    exempt from the per-tool limit (they still count toward the total); ``tool_registry``
    resolves ``ToolCallingChatOptions.tool_names``; ``exception_processor(call, error)`` makes
    the text a failed call sends to the model (raise from it to fail the request instead);
    ``confirmation_policy`` decides which calls wait for a person's approval (default: the
    tools' own ``requires_approval``, so tools that declare nothing never wait).
    The manager keeps no per-request state and is safe to share. Raises ``ValueError`` for a
    limit below 1.
    """

    DEFAULT_MAX_CALLS_PER_TOOL: ClassVar[int] = 40
    DEFAULT_MAX_TOTAL_TOOL_CALLS: ClassVar[int] = 150
    DEFAULT_MAX_IDENTICAL_CALLS: ClassVar[int] = 3

    def __init__(
        self,
        max_calls_per_tool: int = DEFAULT_MAX_CALLS_PER_TOOL,
        max_total_tool_calls: int = DEFAULT_MAX_TOTAL_TOOL_CALLS,
        *,
        max_identical_calls: int | None = DEFAULT_MAX_IDENTICAL_CALLS,
        limit_behavior: ToolCallLimitBehavior | str = ToolCallLimitBehavior.THROW,
        excluded_from_limit: Iterable[str] = (),
        tool_registry: ToolRegistry | None = None,
        exception_processor: ExceptionProcessor | None = None,
        confirmation_policy: ToolCallConfirmationPolicy | None = None,
    ) -> None:
        for label, value in (
            ("max_calls_per_tool", max_calls_per_tool),
            ("max_total_tool_calls", max_total_tool_calls),
            ("max_identical_calls", max_identical_calls),
        ):
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{label} must be a positive integer, got {value!r}")
        self.max_calls_per_tool = max_calls_per_tool
        self.max_total_tool_calls = max_total_tool_calls
        self.max_identical_calls = max_identical_calls
        self.limit_behavior = ToolCallLimitBehavior(limit_behavior)
        self.excluded_from_limit = frozenset(excluded_from_limit)
        self.tool_registry = tool_registry
        self.exception_processor = exception_processor or default_exception_processor
        self.confirmation_policy = confirmation_policy or ToolCallConfirmationPolicy()

    def resolve_tool_callbacks(self, options: ChatOptions | None) -> tuple[ToolCallback, ...]:
        """The options' callbacks, then the callbacks named by ``tool_names``, unique by name.

        Raises ``AdvisorStateError("No ToolCallback found for tool name: <name>")`` for a name
        that neither the callbacks nor the registry know.
        """
        if not isinstance(options, ToolCallingChatOptions):
            return ()
        resolved: dict[str, ToolCallback] = {}
        for callback in options.tool_callbacks:
            resolved.setdefault(callback.name, callback)
        for name in options.tool_names:
            if name in resolved:
                continue
            callback = self.tool_registry.get(name) if self.tool_registry is not None else None
            if callback is None:
                raise AdvisorStateError(f"No ToolCallback found for tool name: {name}")
            resolved[name] = callback
        return tuple(resolved.values())

    def resolve_tool_definitions(self, options: ChatOptions | None) -> tuple[ToolDefinition, ...]:
        """The definitions of :meth:`resolve_tool_callbacks`, in the same order."""
        return tuple(callback.definition for callback in self.resolve_tool_callbacks(options))

    def may_pause(self, options: ChatOptions | None) -> bool:
        """Whether a call of one of ``options``' tools could need approval (a reply may then
        pause the turn)."""
        return any(
            self.confirmation_policy.may_require_approval(callback.name, callback)
            for callback in self.resolve_tool_callbacks(options)
        )

    def check_decisions(
        self,
        assistant: AssistantMessage,
        options: ChatOptions | None,
        decisions: Iterable[ToolCallDecision | Mapping[str, Any]],
        granted: Collection[str] = (),
    ) -> AssistantMessage:
        """``assistant`` as ``decisions`` would run it (edited arguments applied), without
        running anything: what :meth:`execute_tool_calls` checks first on a resume, for callers
        that refuse bad decisions before a turn starts. Raises
        :class:`~.approval.ToolCallDecisionError` as it would."""
        callbacks = {cb.name: cb for cb in self.resolve_tool_callbacks(options)}
        applied, _ = self._apply_decisions(
            assistant, callbacks, index_decisions(decisions), granted
        )
        return applied

    def pending_approvals(
        self,
        tool_calls: Sequence[ToolCall],
        callbacks: Mapping[str, ToolCallback],
        granted: Collection[str] = (),
    ) -> tuple[PendingToolCall, ...]:
        """The calls of ``tool_calls`` that need approval, in order (tools named in ``granted``
        never do); ``callbacks`` maps tool names to the turn's tools."""
        pending = []
        for call in tool_calls:
            if call.name in granted:
                continue
            requirement = self.confirmation_policy.requirement(call, callbacks.get(call.name))
            if requirement is None:
                continue
            arguments = parse_arguments(call.arguments)
            pending.append(
                PendingToolCall(
                    call.id,
                    call.name,
                    call.arguments if arguments is None else arguments,
                    requirement.allowed_decisions,
                    requirement.reason,
                )
            )
        return tuple(pending)

    def _apply_decisions(
        self,
        assistant: AssistantMessage,
        callbacks: Mapping[str, ToolCallback],
        decisions: Mapping[str, ToolCallDecision],
        granted: Collection[str],
    ) -> tuple[AssistantMessage, dict[str, str]]:
        """The assistant message with edited arguments, and the rejection text by call id.

        Every call that needs approval must have a decision the policy allows; an edit is
        checked again against the policy of the new arguments. Calls that need none may have
        a decision too (then it applies) or none (they run).
        """
        known = {call.id for call in assistant.tool_calls}
        unknown = sorted(set(decisions) - known)
        if unknown:
            raise ToolCallDecisionError(
                f"decisions for calls the reply does not hold: {', '.join(unknown)}; "
                f"its calls are {', '.join(sorted(known))}"
            )
        calls: list[ToolCall] = []
        rejected: dict[str, str] = {}
        for call in assistant.tool_calls:
            callback = callbacks.get(call.name)
            requirement = (
                None
                if call.name in granted
                else self.confirmation_policy.requirement(call, callback)
            )
            decision = decisions.get(call.id)
            if decision is None:
                if requirement is not None:
                    raise ToolCallDecisionError(
                        f"no decision for pending call {call.id!r} of tool {call.name!r}"
                    )
                calls.append(call)
                continue
            allowed = requirement.allowed_decisions if requirement else ALL_DECISIONS
            if decision.decision.value not in allowed:
                raise ToolCallDecisionError(
                    f"decision {decision.decision.value!r} is not allowed for call {call.id!r} "
                    f"of tool {call.name!r}; allowed: {', '.join(allowed)}"
                )
            if decision.decision is ApprovalDecision.REJECT:
                rejected[call.id] = decision.rejection_text(call.name)
            elif decision.decision is ApprovalDecision.EDIT:
                assert decision.arguments is not None  # ToolCallDecision guarantees it
                call = replace(call, arguments=decision.arguments)
                again = (
                    None
                    if call.name in granted
                    else self.confirmation_policy.requirement(call, callback)
                )
                if again is not None and ApprovalDecision.EDIT.value not in again.allowed_decisions:
                    raise ToolCallDecisionError(
                        f"the edited arguments of call {call.id!r} need a decision the policy "
                        f"of tool {call.name!r} does not allow to edit into; allowed: "
                        f"{', '.join(again.allowed_decisions)}"
                    )
            calls.append(call)
        if any(a is not b for a, b in zip(calls, assistant.tool_calls, strict=True)):
            assistant = replace(assistant, tool_calls=tuple(calls))
        return assistant, rejected

    async def execute_tool_calls(
        self,
        prompt: Prompt,
        chat_response: ChatResponse,
        observer: ToolCallObserver | None = None,
        *,
        decisions: Iterable[ToolCallDecision | Mapping[str, Any]] | None = None,
        granted: Collection[str] = (),
    ) -> ToolExecutionResult:
        """Run the tool calls of ``chat_response`` and return the extended history.

        ``prompt`` holds the turn's full history and the options whose callbacks are used;
        ``observer`` is told when each call starts and how it ended. ``decisions`` (one
        :class:`~.approval.ToolCallDecision`, or its dict shape, per call that needs approval)
        resume a paused reply; ``granted`` names tools that need no approval in this request.
        Raises ``AdvisorStateError("No tool call requested by the chat model")`` when no
        generation has tool calls, :class:`~.approval.ToolApprovalRequiredError` (nothing ran)
        when calls need approval and no ``decisions`` are given,
        :class:`~.approval.ToolCallDecisionError` when the decisions do not fit the calls, and
        :class:`ToolCallLimitExceededError` on a breach that ends the turn.

        Overrides may keep the signature of an earlier release, ``(prompt, chat_response)``:
        the ``ToolCallingAdvisor`` passes ``observer``, ``granted`` and ``decisions`` only to
        an override that takes them (``decisions`` only when resuming a paused reply).
        """
        if chat_response is None:
            raise ValueError("chatResponse cannot be null")
        generation = next((g for g in chat_response.generations if g.output.tool_calls), None)
        if generation is None:
            raise AdvisorStateError("No tool call requested by the chat model")
        assistant = generation.output
        options = prompt.options
        callbacks = {cb.name: cb for cb in self.resolve_tool_callbacks(options)}
        tool_context = options.tool_context if isinstance(options, ToolCallingChatOptions) else {}
        history = prompt.instructions
        rejected: dict[str, str] = {}
        if decisions is None:
            pending = self.pending_approvals(assistant.tool_calls, callbacks, granted)
            if pending:
                raise ToolApprovalRequiredError(pending, (*history, assistant))
        else:
            assistant, rejected = self._apply_decisions(
                assistant, callbacks, index_decisions(decisions), granted
            )
        counts = _TurnCounts(history)

        planned: list[tuple[ToolCall, ToolCallback | None, str | None]] = []
        for call in assistant.tool_calls:
            if call.id in rejected:
                planned.append((call, None, rejected[call.id]))
                continue
            breach = self._breach(call, counts)
            if breach is not None:
                ends_turn = (
                    self.limit_behavior is ToolCallLimitBehavior.THROW
                    or breach.kind == "identical"
                    or counts.responses[breach.text] > 0
                )
                if ends_turn:
                    responses = await self._run(planned, tool_context, observer)
                    responses.append(_refused(call, breach.text, observer))
                    raise ToolCallLimitExceededError(
                        breach.message,
                        limit=breach.limit,
                        kind=breach.kind,
                        tool_name=breach.tool_name,
                        partial_history=(
                            *history,
                            assistant,
                            ToolResponseMessage(tuple(responses)),
                        ),
                    )
                planned.append((call, None, breach.text))
                continue
            counts.per_tool[call.name] += 1
            counts.total += 1
            counts.identical[(call.name, canonical_arguments(call.arguments))] += 1
            callback = callbacks.get(call.name)
            unknown = (
                None
                if callback is not None
                else f"No ToolCallback found for tool name: {call.name}"
            )
            planned.append((call, callback, unknown))

        outcomes = await self._run_with_status(planned, tool_context, observer)
        responses = [response for response, _ in outcomes]
        ran = [
            (callback, ok)
            for (_, callback, fixed), (_, ok) in zip(planned, outcomes, strict=True)
            if callback is not None and fixed is None
        ]
        return_direct = bool(ran) and all(ok and cb.return_direct for cb, ok in ran)
        return ToolExecutionResult(
            (*history, assistant, ToolResponseMessage(tuple(responses))), return_direct
        )

    def _breach(self, call: ToolCall, counts: _TurnCounts) -> _Breach | None:
        name = call.name
        limit = self.max_identical_calls
        key = (name, canonical_arguments(call.arguments))
        if limit is not None and counts.identical[key] >= limit:
            return _Breach(
                "identical",
                limit,
                name,
                _identical_limit_text(limit, name),
                f"Identical tool call limit ({limit}) exceeded for tool '{name}'",
            )
        limit = self.max_calls_per_tool
        if name not in self.excluded_from_limit and counts.per_tool[name] >= limit:
            return _Breach(
                "tool",
                limit,
                name,
                _tool_limit_text(limit, name),
                f"Tool call limit ({limit}) exceeded for tool '{name}'",
            )
        limit = self.max_total_tool_calls
        if counts.total >= limit:
            return _Breach(
                "total",
                limit,
                None,
                _total_limit_text(limit),
                f"Total tool call limit ({limit}) exceeded for this turn",
            )
        return None

    async def _run(
        self,
        planned: list[tuple[ToolCall, ToolCallback | None, str | None]],
        tool_context: Any,
        observer: ToolCallObserver | None,
    ) -> list[ToolResponse]:
        outcomes = await self._run_with_status(planned, tool_context, observer)
        return [response for response, _ in outcomes]

    async def _run_with_status(
        self,
        planned: list[tuple[ToolCall, ToolCallback | None, str | None]],
        tool_context: Any,
        observer: ToolCallObserver | None,
    ) -> list[tuple[ToolResponse, bool]]:
        async def one(
            call: ToolCall, callback: ToolCallback | None, fixed: str | None
        ) -> tuple[ToolResponse, bool]:
            if fixed is not None or callback is None:
                return _refused(call, fixed or "", observer), False
            if observer is not None:
                observer.tool_call_started(call)
            started = time.perf_counter()
            try:
                data = await callback.call(call.arguments, tool_context)
            except Exception as error:
                if isinstance(error, ToolArgumentsError):
                    logger.info("%s", error)
                elif _expected(error):
                    logger.warning("tool %r failed: %s", call.name, error)
                else:
                    logger.warning("tool %r failed: %s", call.name, error, exc_info=True)
                text = self.exception_processor(call, error)
                if observer is not None:
                    observer.tool_call_finished(call, False, text, time.perf_counter() - started)
                return ToolResponse(call.id, call.name, text), False
            if observer is not None:
                observer.tool_call_finished(call, True, None, time.perf_counter() - started)
            return ToolResponse(call.id, call.name, data), True

        if len(planned) == 1:
            return [await one(*planned[0])]
        tasks = [asyncio.ensure_future(one(*item)) for item in planned]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # gather leaves the other calls running when one fails; a failed round stops them.
            for task in tasks:
                task.cancel()
            raise
