"""``ChatClient``: the fluent entry point (Spring AI ``ChatClient`` / ``DefaultChatClient``).

``client.prompt().user("hi").call().content()`` builds a request, runs it through the advisor
chain, and returns the answer. Divergences from Spring AI, each a fix: calling several accessors
on one ``call()`` runs the chain once (defect 5.1.3); default advisor params survive
``mutate()`` with no default advisors (5.2.10); ``entity()`` adds format instructions in calls
and streams alike (seed §6.16.1 第三条); an advisor that cannot run in the requested mode
(call-only in a stream, stream-only in a call) fails chain assembly with an error naming it
instead of being skipped silently (bug case B18).

Tool loop auto-registration (reference §2.7): unless the advisor param
``TOOL_CALLING_AUTO_REGISTER`` is ``False`` or a tool advisor is already present, each chain
gets a ``ToolCallingAdvisor`` (even with no tools, so tools added by other advisors work) whose
``conversation_history_enabled`` is ``False`` exactly when a memory advisor runs inside the
loop (order greater than the tool advisor's). The advisor is added to the chain only, never to
the client or the request spec (fix for defect 5.2.11). "Tool advisor" and "memory advisor"
mean the class's ``ROLES`` hold :attr:`AdvisorRole.TOOL` / :attr:`AdvisorRole.MEMORY` (the
``ToolAdvisor`` and ``MemoryAdvisor`` markers give them), the same metadata the chain lint
reads through the advisor-type registry.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any

from ._sync import run_sync
from .advisor import Advisor, AdvisorRole, CallAdvisor, StreamAdvisor, has_role
from .aggregation import ChatClientResponseAccumulator
from .attributes import (
    OUTPUT_FORMAT,
    STRUCTURED_OUTPUT_NATIVE,
    STRUCTURED_OUTPUT_SCHEMA,
    TOOL_CALLING_AUTO_REGISTER,
)
from .chain import ChatModelCallAdvisor, ChatModelStreamAdvisor, DefaultAroundAdvisorChain
from .exceptions import AdvisorStateError
from .messages import Message, SystemMessage, UserMessage
from .model import ChatModel
from .observation import AdvisorObserver
from .prompt import ChatOptions, Prompt, ToolCallingChatOptions, merge_options
from .requests import ChatClientRequest, ChatClientResponse
from .response import ChatResponse
from .streams import closing_stream
from .structured import format_instructions, json_schema_for, parse_json_output, to_entity
from .templates import render

__all__ = [
    "CallResponseSpec",
    "ChatClient",
    "ChatClientRequestSpec",
    "MemoryInsideToolLoopWarning",
    "StreamResponseSpec",
]


class MemoryInsideToolLoopWarning(UserWarning):
    """Warned when a memory advisor is ordered inside the tool loop (bug case B09)."""


class ChatClient:
    """A client bound to one chat model, with defaults applied to every request.

    ``default_system`` is the system text used when a request sets none; ``default_advisors``
    run before per-request advisors of the same order; ``default_advisor_params`` seed every
    request's context; ``default_options`` are merged under per-request options;
    ``default_tools`` are added to every request's tools. ``observer`` sees every advisor
    invocation (tracing). ``tool_calling_manager`` is the manager of the auto-registered
    ``ToolCallingAdvisor`` (for example one with a ``ToolRegistry`` for tool names). The client
    is immutable and safe to share between concurrent requests.
    """

    def __init__(
        self,
        chat_model: ChatModel,
        default_system: str | None = None,
        default_advisors: Iterable[Advisor] = (),
        default_advisor_params: Mapping[str, Any] | None = None,
        default_options: ChatOptions | None = None,
        default_tools: Iterable[Any] = (),
        *,
        observer: AdvisorObserver | None = None,
        tool_calling_manager: Any = None,
    ) -> None:
        if chat_model is None:
            raise ValueError("chatModel cannot be null")
        self.chat_model = chat_model
        self.default_system = default_system
        self.default_advisors = _checked_advisors(default_advisors)
        self.default_advisor_params = _checked_params(default_advisor_params or {})
        self.default_options = default_options
        self.default_tools = tuple(default_tools)
        self.observer = observer
        self.tool_calling_manager = tool_calling_manager
        # The two possible auto-registered tool advisors (history on/off), built on first use;
        # they are stateless, so every request may share them.
        self._tool_advisors: dict[bool, Advisor] = {}
        self._model_advisors = (
            ChatModelCallAdvisor(chat_model),
            ChatModelStreamAdvisor(chat_model),
        )
        # Assembled chains of requests without per-request advisors, by (mode, auto-register).
        self._chains: dict[tuple[type[Advisor], bool], DefaultAroundAdvisorChain] = {}

    def prompt(self, content: str | Prompt | None = None) -> ChatClientRequestSpec:
        """Start a request; ``content`` is user text or a whole :class:`Prompt`."""
        return ChatClientRequestSpec(self, content)

    def mutate(self, **overrides: Any) -> ChatClient:
        """A new client with the same defaults except the keyword ``overrides``."""
        settings: dict[str, Any] = {
            "chat_model": self.chat_model,
            "default_system": self.default_system,
            "default_advisors": self.default_advisors,
            "default_advisor_params": self.default_advisor_params,
            "default_options": self.default_options,
            "default_tools": self.default_tools,
            "observer": self.observer,
            "tool_calling_manager": self.tool_calling_manager,
        }
        unknown = set(overrides) - set(settings)
        if unknown:
            raise TypeError(f"unknown ChatClient setting(s): {', '.join(sorted(unknown))}")
        settings.update(overrides)
        return ChatClient(**settings)

    def _assemble(
        self, advisors: list[Advisor], mode: type[Advisor], auto_register: bool
    ) -> DefaultAroundAdvisorChain:
        """Validate ``advisors`` for ``mode``, add the tool loop if needed, and build the chain.

        Raises :class:`AdvisorStateError` for two tool advisors or an advisor that cannot run
        in ``mode``; warns when a memory advisor sits inside the tool loop (bug case B09).
        """
        tool_advisors = [a for a in advisors if has_role(a, AdvisorRole.TOOL)]
        if len(tool_advisors) > 1:
            found = ", ".join(f"{a.name} (order={a.order})" for a in tool_advisors)
            raise AdvisorStateError(
                "At most one ToolAdvisor is allowed in the advisor chain, "
                f"but found {len(tool_advisors)}: [{found}]"
            )
        if not tool_advisors and auto_register:
            tool_advisors.append(self._auto_tool_advisor(advisors))
            advisors.append(tool_advisors[0])
        for advisor in advisors:
            if not isinstance(advisor, mode):
                have = "StreamAdvisor" if mode is CallAdvisor else "CallAdvisor"
                raise AdvisorStateError(
                    f"Advisor '{advisor.name}' implements only {have} and cannot run in a "
                    f"{'call' if mode is CallAdvisor else 'stream'}; implement {mode.__name__} "
                    "or extend BaseAdvisor"
                )
        for tool_advisor in tool_advisors:
            for inner in advisors:
                if (
                    has_role(inner, AdvisorRole.MEMORY)
                    and inner.order > tool_advisor.order
                    # Session memory works per model call, inside the loop, by design.
                    and not getattr(inner, "INSIDE_TOOL_LOOP", False)
                ):
                    warnings.warn(
                        f"{inner.name} (order={inner.order}) runs inside {tool_advisor.name} "
                        f"(order={tool_advisor.order}): it will read and write memory on every "
                        "tool round; give it a smaller order than the tool advisor",
                        MemoryInsideToolLoopWarning,
                        stacklevel=4,
                    )
        return DefaultAroundAdvisorChain([*advisors, *self._model_advisors])

    def _auto_tool_advisor(self, advisors: list[Advisor]) -> Advisor:
        from .advisors.tool_calling import ToolCallingAdvisor

        history = not any(
            has_role(a, AdvisorRole.MEMORY) and a.order > ToolCallingAdvisor.DEFAULT_ORDER
            for a in advisors
        )
        advisor = self._tool_advisors.get(history)
        if advisor is None:
            advisor = ToolCallingAdvisor(
                tool_calling_manager=self.tool_calling_manager,
                conversation_history_enabled=history,
            )
            self._tool_advisors[history] = advisor
        return advisor


def _checked_advisors(advisors: Iterable[Advisor]) -> tuple[Advisor, ...]:
    if advisors is None:
        raise ValueError("advisors cannot be null")
    listed = tuple(advisors)
    if any(a is None for a in listed):
        raise ValueError("advisors cannot contain null elements")
    return listed


def _checked_params(params: Mapping[str, Any]) -> dict[str, Any]:
    if params is None:
        raise ValueError("params cannot be null")
    for key, value in params.items():
        if key is None:
            raise ValueError("param keys cannot contain null elements")
        if value is None:
            raise ValueError("param values cannot contain null elements")
    return dict(params)


class ChatClientRequestSpec:
    """A request being assembled; each method returns the spec so calls chain fluently."""

    def __init__(self, client: ChatClient, content: str | Prompt | None = None) -> None:
        self._client = client
        self._system: str | None = None
        self._user: str | None = None
        self._messages: list[Message] = []
        self._advisors: list[Advisor] = []
        self._params: dict[str, Any] = {}
        self._options: ChatOptions | None = None
        self._tools: list[Any] = []
        self._observer = client.observer
        if isinstance(content, Prompt):
            self._messages.extend(content.instructions)
            self._options = content.options
        elif content is not None:
            self._user = content

    def system(self, text: str, /, **params: Any) -> ChatClientRequestSpec:
        """Set the system text; with ``params`` it is rendered as a ``{name}`` template."""
        self._system = render(text, params) if params else text
        return self

    def user(self, text: str, /, **params: Any) -> ChatClientRequestSpec:
        """Set the user text; with ``params`` it is rendered as a ``{name}`` template."""
        self._user = render(text, params) if params else text
        return self

    def messages(self, *messages: Message) -> ChatClientRequestSpec:
        """Add messages placed between the system text and the user text."""
        if any(m is None for m in messages):
            raise ValueError("messages cannot contain null elements")
        self._messages.extend(messages)
        return self

    def advisors(self, *advisors: Advisor) -> ChatClientRequestSpec:
        self._advisors.extend(_checked_advisors(advisors))
        return self

    def advisor_param(self, key: str, value: Any) -> ChatClientRequestSpec:
        """Set one advisor param (initial context entry); later values win."""
        if not key or not str(key).strip():
            raise ValueError("key cannot be null or empty")
        if value is None:
            raise ValueError("value cannot be null")
        self._params[key] = value
        return self

    def advisor_params(self, params: Mapping[str, Any]) -> ChatClientRequestSpec:
        self._params.update(_checked_params(params))
        return self

    def options(self, options: ChatOptions) -> ChatClientRequestSpec:
        self._options = merge_options(self._options, options)
        return self

    def tools(self, *tools: Any) -> ChatClientRequestSpec:
        """Add tools: ``ToolCallback`` objects, or tool names to resolve from a registry."""
        self._tools.extend(tools)
        return self

    def observer(self, observer: AdvisorObserver | None) -> ChatClientRequestSpec:
        """Watch this request's advisor invocations (replaces the client's observer)."""
        self._observer = observer
        return self

    def to_request(self, extra_context: Mapping[str, Any] | None = None) -> ChatClientRequest:
        """The :class:`ChatClientRequest` this spec describes (messages: system, messages, user)."""
        client = self._client
        messages: list[Message] = []
        # An explicit system text always leads; the client's default yields to system messages
        # the request brings itself.
        if self._system is not None:
            messages.append(SystemMessage(self._system))
        elif client.default_system is not None and not any(
            isinstance(m, SystemMessage) for m in self._messages
        ):
            messages.append(SystemMessage(client.default_system))
        messages.extend(self._messages)
        if self._user is not None:
            messages.append(UserMessage(self._user))
        options = merge_options(client.default_options, self._options)
        tools = [*client.default_tools, *self._tools]
        if tools:
            callbacks = tuple(t for t in tools if not isinstance(t, str))
            names = tuple(t for t in tools if isinstance(t, str))
            options = merge_options(
                options, ToolCallingChatOptions(tool_callbacks=callbacks, tool_names=names)
            )
        context = {**client.default_advisor_params, **self._params, **(extra_context or {})}
        return ChatClientRequest(Prompt(tuple(messages), options), context)

    def _chain(self, mode: type[Advisor]) -> DefaultAroundAdvisorChain:
        client = self._client
        params = {**client.default_advisor_params, **self._params}
        auto_register = params.get(TOOL_CALLING_AUTO_REGISTER) is not False
        chain: DefaultAroundAdvisorChain | None
        if self._advisors:
            chain = client._assemble(
                [*client.default_advisors, *self._advisors], mode, auto_register
            )
        else:
            # Chains are immutable, so the client's own chain is assembled once and shared.
            key = (mode, auto_register)
            chain = client._chains.get(key)
            if chain is None:
                chain = client._assemble(list(client.default_advisors), mode, auto_register)
                client._chains[key] = chain
        return chain if self._observer is None else chain.with_observer(self._observer)

    async def _execute(self, extra_context: Mapping[str, Any] | None = None) -> ChatClientResponse:
        chain = self._chain(CallAdvisor)
        return await chain.next_call(self.to_request(extra_context))

    def call(self) -> CallResponseSpec:
        """The blocking response; the chain runs once, on the first accessor."""
        return CallResponseSpec(self)

    async def acall(self) -> CallResponseSpec:
        """Run the chain now (async) and return the resolved response spec.

        The chain has run by the time this returns, so a later ``entity(T)`` parses the answer
        as it is; to send ``T``'s format instructions, use ``await spec.call().aentity(T)``.
        """
        spec = CallResponseSpec(self)
        await spec.achat_client_response()
        return spec

    def stream(self) -> StreamResponseSpec:
        """The streaming response; the chain runs when an accessor is iterated."""
        return StreamResponseSpec(self)


def _entity_context(target: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    schema = json_schema_for(target)
    if params.get(STRUCTURED_OUTPUT_NATIVE) is True:
        return {STRUCTURED_OUTPUT_SCHEMA: schema}
    return {OUTPUT_FORMAT: format_instructions(schema), STRUCTURED_OUTPUT_SCHEMA: schema}


def _parse_entity(text: str | None, target: Any) -> Any:
    if text is None:
        return None
    try:
        data = parse_json_output(text)
    except ValueError as exc:
        raise ValueError(f"the model output is not valid JSON ({exc}): {text[:200]!r}") from exc
    return to_entity(data, target)


class CallResponseSpec:
    """Accessors of a blocking response. The chain runs once, on the first accessor used.

    Each accessor has an async twin prefixed ``a``. ``entity(target)`` used first adds format
    instructions for ``target`` to the request; used after another accessor it parses the
    answer already received.
    """

    def __init__(self, request_spec: ChatClientRequestSpec) -> None:
        self._spec = request_spec
        self._pending: asyncio.Future[ChatClientResponse] | None = None
        self._response: ChatClientResponse | None = None

    async def _resolve(self, extra_context: Mapping[str, Any] | None = None) -> ChatClientResponse:
        if self._response is not None:
            return self._response
        if self._pending is not None:
            # Another accessor is running the chain: share its result.
            return await self._pending
        # A bare future (not a task: no scheduling round trip) for concurrent accessors to await.
        self._pending = asyncio.get_running_loop().create_future()
        try:
            self._response = await self._spec._execute(extra_context)
        except BaseException as exc:
            self._pending.set_exception(exc)
            self._pending.exception()  # retrieved here, so an unawaited failure is not logged
            raise
        self._pending.set_result(self._response)
        return self._response

    def _resolve_sync(self, extra_context: Mapping[str, Any] | None = None) -> ChatClientResponse:
        if self._response is None:
            run_sync(self._resolve(extra_context))
        return self._response  # type: ignore[return-value]

    def _entity_extra(self, target: Any) -> dict[str, Any] | None:
        return None if self._pending is not None else _entity_context(target, self._spec._params)

    async def achat_client_response(self) -> ChatClientResponse:
        return await self._resolve()

    async def achat_response(self) -> ChatResponse | None:
        return (await self._resolve()).chat_response

    async def acontent(self) -> str | None:
        return _content(await self._resolve())

    async def aentity(self, target: Any) -> Any:
        return _parse_entity(_content(await self._resolve(self._entity_extra(target))), target)

    def chat_client_response(self) -> ChatClientResponse:
        return self._resolve_sync()

    def chat_response(self) -> ChatResponse | None:
        return self._resolve_sync().chat_response

    def content(self) -> str | None:
        """The text of every generation joined with ``"\\n"``; ``None`` without a response."""
        return _content(self._resolve_sync())

    def entity(self, target: Any) -> Any:
        """The answer parsed as JSON and converted to ``target`` (a type or a JSON Schema)."""
        return _parse_entity(_content(self._resolve_sync(self._entity_extra(target))), target)


def _content(response: ChatClientResponse) -> str | None:
    chat_response = response.chat_response
    return chat_response.text if chat_response is not None and chat_response.generations else None


class StreamResponseSpec:
    """Accessors of a streaming response; each accessor runs the chain when iterated.

    Iterate inside ``contextlib.aclosing`` (or exhaust the iterator) so that stopping early
    closes the model stream at once rather than when the iterator is garbage-collected.
    """

    def __init__(self, request_spec: ChatClientRequestSpec) -> None:
        self._spec = request_spec

    async def chat_client_responses(
        self, extra_context: Mapping[str, Any] | None = None
    ) -> AsyncIterator[ChatClientResponse]:
        chain = self._spec._chain(StreamAdvisor)
        request = self._spec.to_request(extra_context)
        async with closing_stream(chain.next_stream(request)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def chat_responses(self) -> AsyncIterator[ChatResponse]:
        async with closing_stream(self.chat_client_responses()) as chunks:
            async for chunk in chunks:
                if chunk.chat_response is not None:
                    yield chunk.chat_response

    async def content(self) -> AsyncIterator[str]:
        """The text deltas in order; empty deltas are dropped (as Spring AI does)."""
        async with closing_stream(self.chat_client_responses()) as chunks:
            async for chunk in chunks:
                response = chunk.chat_response
                if response is not None and response.generations:
                    text = response.text
                    if text:
                        yield text

    async def aggregate(self, extra_context: Mapping[str, Any] | None = None) -> ChatClientResponse:
        """Consume the stream and return the aggregated response with the merged context."""
        accumulator = ChatClientResponseAccumulator()
        async with closing_stream(self.chat_client_responses(extra_context)) as chunks:
            async for chunk in chunks:
                accumulator.add(chunk)
        return accumulator.result()

    async def entity(self, target: Any) -> Any:
        """Stream with format instructions for ``target`` and parse the aggregated answer."""
        aggregated = await self.aggregate(_entity_context(target, self._spec._params))
        return _parse_entity(_content(aggregated), target)
