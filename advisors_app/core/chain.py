"""The advisor chain (Spring AI ``CallAdvisorChain``, ``StreamAdvisorChain``,
``DefaultAroundAdvisorChain``).

Divergences from Spring AI, each a fix (reference §5.1):

* **stable ties**: advisors with equal ``order`` run in registration order, in the top-level
  chain and in every copy alike (Spring reverses ties, and reverses them again in copies);
* **the model advisor is always innermost**: a user advisor at ``LOWEST_PRECEDENCE`` still runs
  (Spring silently skips it);
* **an immutable position**, not a consumed queue: ``next_call`` from the same chain object
  runs the same downstream advisors every time, which is what loops and retries need.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable

from .advisor import (
    LOWEST_PRECEDENCE,
    Advisor,
    CallAdvisor,
    CallAdvisorChain,
    StreamAdvisor,
    StreamAdvisorChain,
)
from .aggregation import combine_stream_usage
from .attributes import (
    CHAT_MODEL_OVERRIDE,
    OUTPUT_FORMAT,
    STRUCTURED_OUTPUT_NATIVE,
    STRUCTURED_OUTPUT_SCHEMA,
)
from .context_window import acheck_context_window
from .exceptions import AdvisorStateError
from .metering import MODEL_CALL_METER, ModelCallMeter
from .model import ChatModel
from .observation import AdvisorObserver
from .prompt import ChatOptions, Prompt
from .requests import ChatClientRequest, ChatClientResponse
from .response import Usage
from .streams import closing_stream

__all__ = [
    "CallAdvisorChain",
    "ChatModelCallAdvisor",
    "ChatModelStreamAdvisor",
    "DefaultAroundAdvisorChain",
    "StreamAdvisorChain",
]


def _sorted(advisors: Iterable[Advisor]) -> tuple[Advisor, ...]:
    if advisors is None:
        raise ValueError("the advisors must be non-null")
    listed = list(advisors)
    for advisor in listed:
        if advisor is None:
            raise ValueError("the advisors must not contain null elements")
        if not isinstance(advisor, (CallAdvisor, StreamAdvisor)):
            raise ValueError(f"{advisor!r} is neither a CallAdvisor nor a StreamAdvisor")
        if not advisor.name:
            raise ValueError("advisorName cannot be null or empty")
    ranked = sorted(
        range(len(listed)),
        key=lambda i: (getattr(listed[i], "is_model_advisor", False), listed[i].order, i),
    )
    return tuple(listed[i] for i in ranked)


class DefaultAroundAdvisorChain(CallAdvisorChain, StreamAdvisorChain):
    """An immutable position in an ordered list of advisors.

    ``DefaultAroundAdvisorChain(advisors)`` sorts ``advisors`` by ``order`` (ties keep
    registration order; the model advisors always last) and splits them into the call and
    stream sequences. ``next_call(request)`` runs the advisor at this position with the chain
    one step further on; an exhausted chain raises
    ``AdvisorStateError("No CallAdvisors available to execute")`` (streams raise
    ``"No StreamAdvisors available to execute"`` while iterating). ``copy(after)`` is the chain
    that starts right after ``after``.
    """

    __slots__ = (
        "_call_base",
        "_call_index",
        "_calls",
        "_next",
        "_observer",
        "_stream_base",
        "_stream_index",
        "_streams",
    )

    def __init__(
        self, advisors: Iterable[Advisor], *, observer: AdvisorObserver | None = None
    ) -> None:
        ordered = _sorted(advisors)
        self._calls: tuple[CallAdvisor, ...] = tuple(
            a for a in ordered if isinstance(a, CallAdvisor)
        )
        self._streams: tuple[StreamAdvisor, ...] = tuple(
            a for a in ordered if isinstance(a, StreamAdvisor)
        )
        self._observer = observer
        self._call_base = self._call_index = 0
        self._stream_base = self._stream_index = 0
        self._next: DefaultAroundAdvisorChain | None = None

    def _at(
        self, call_base: int, call_index: int, stream_base: int, stream_index: int
    ) -> DefaultAroundAdvisorChain:
        chain = object.__new__(DefaultAroundAdvisorChain)
        chain._calls = self._calls
        chain._streams = self._streams
        chain._observer = self._observer
        chain._call_base, chain._call_index = call_base, call_index
        chain._stream_base, chain._stream_index = stream_base, stream_index
        chain._next = None
        return chain

    def _advanced(self) -> DefaultAroundAdvisorChain:
        # One step further for both traversals; cached because a position never changes.
        if self._next is None:
            self._next = self._at(
                self._call_base, self._call_index + 1, self._stream_base, self._stream_index + 1
            )
        return self._next

    @property
    def observer(self) -> AdvisorObserver | None:
        return self._observer

    def with_observer(self, observer: AdvisorObserver | None) -> DefaultAroundAdvisorChain:
        """This chain position watched by ``observer`` (the sorted advisors are shared)."""
        chain = self._at(self._call_base, self._call_index, self._stream_base, self._stream_index)
        chain._observer = observer
        return chain

    @property
    def call_advisors(self) -> tuple[CallAdvisor, ...]:
        """The call advisors of this chain in execution order (unchanged by ``next_call``)."""
        return self._calls[self._call_base :]

    @property
    def stream_advisors(self) -> tuple[StreamAdvisor, ...]:
        """The stream advisors of this chain in execution order (unchanged by ``next_stream``)."""
        return self._streams[self._stream_base :]

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        if request is None:
            raise ValueError("the chatClientRequest cannot be null")
        if self._call_index >= len(self._calls):
            raise AdvisorStateError("No CallAdvisors available to execute")
        advisor = self._calls[self._call_index]
        rest = self._advanced()
        if self._observer is None:
            return await advisor.advise_call(request, rest)
        return await self._observer.observe_call(
            advisor, request, lambda r: advisor.advise_call(r, rest)
        )

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        if request is None:
            raise ValueError("the chatClientRequest cannot be null")
        if self._stream_index >= len(self._streams):
            return _exhausted_stream()
        advisor = self._streams[self._stream_index]
        rest = self._advanced()
        if self._observer is None:
            return advisor.advise_stream(request, rest)
        return self._observer.observe_stream(
            advisor, request, lambda r: advisor.advise_stream(r, rest)
        )

    def copy(self, after: Advisor) -> DefaultAroundAdvisorChain:
        """The chain of the advisors that follow ``after`` (Spring AI ``copy(after)``).

        Raises ``ValueError`` when ``after`` is ``None`` or not part of this chain.
        """
        if after is None:
            raise ValueError("The after advisor must not be null")
        call_at = _index_of(self._calls, after, self._call_base)
        stream_at = _index_of(self._streams, after, self._stream_base)
        if call_at < 0 and stream_at < 0:
            raise ValueError(f"The specified advisor is not part of the chain: {after.name}")
        call_start = call_at + 1 if call_at >= 0 else len(self._calls)
        stream_start = stream_at + 1 if stream_at >= 0 else len(self._streams)
        return self._at(call_start, call_start, stream_start, stream_start)

    def __repr__(self) -> str:
        names = ", ".join(a.name for a in self._calls[self._call_index :])
        return f"DefaultAroundAdvisorChain([{names}])"


def _index_of(advisors: tuple[Advisor, ...], target: Advisor, start: int) -> int:
    for i in range(start, len(advisors)):
        if advisors[i] is target:
            return i
    return -1


async def _exhausted_stream() -> AsyncIterator[ChatClientResponse]:
    raise AdvisorStateError("No StreamAdvisors available to execute")
    yield  # pragma: no cover - makes this an async generator


def augment_with_format_instructions(request: ChatClientRequest) -> Prompt:
    """The prompt with the context's format instructions applied.

    Spring AI ``augmentWithFormatInstructions``.

    With ``STRUCTURED_OUTPUT_NATIVE`` set to ``True`` and a schema, the schema goes to the model as
    ``response_format``; otherwise a non-blank ``OUTPUT_FORMAT`` is appended to the last user
    message after a newline. Divergences (defect 5.2.12): the native flag's *value* counts, not
    its presence, and an empty format appends nothing.
    """
    prompt = request.prompt
    context = request.context
    output_format = context.get(OUTPUT_FORMAT)
    schema = context.get(STRUCTURED_OUTPUT_SCHEMA)
    if context.get(STRUCTURED_OUTPUT_NATIVE) is True and schema:
        options = prompt.options or ChatOptions()
        response_format = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": schema, "strict": False},
        }
        return prompt.mutate(options=options.mutate(response_format=response_format))
    if isinstance(output_format, str) and output_format.strip():
        return prompt.augment_user_message(lambda m: m.text + "\n" + output_format)
    return prompt


class _ModelAdvisor:
    """What the two innermost advisors share: the model, the order, the model override."""

    __slots__ = ("_model", "_order")
    is_model_advisor = True

    def __init__(self, chat_model: ChatModel) -> None:
        if chat_model is None:
            raise AdvisorStateError("chatModel cannot be null")
        self._model = chat_model
        self._order = LOWEST_PRECEDENCE

    def _model_for(self, request: ChatClientRequest) -> ChatModel:
        override: ChatModel | None = request.context.get(CHAT_MODEL_OVERRIDE)
        return override or self._model


class ChatModelCallAdvisor(_ModelAdvisor, CallAdvisor):
    """The innermost call advisor: sends the prompt to the model (``ChatModelCallAdvisor``).

    Named ``"call"``, order ``LOWEST_PRECEDENCE``, always last. The response keeps the request
    context as it is (``None`` values allowed; Spring's ``Map.copyOf`` throws, defect 5.1.7).
    A ``ChatModel`` under ``CHAT_MODEL_OVERRIDE`` in the context is called instead of the
    client's model (how ``FallbackAdvisor`` re-runs the chain on another model). Before the
    call, the prompt is checked against the model's context window
    (:func:`~advisors_app.core.context_window.acheck_context_window`, which raises
    ``ContextOverflowError``; a model without a window is not checked; no Spring AI
    counterpart).
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "call"

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        model = self._model_for(request)
        prompt = augment_with_format_instructions(request)
        meter: ModelCallMeter | None = request.context.get(MODEL_CALL_METER)
        if meter is None:
            await acheck_context_window(model, prompt)
            response = await model.call(prompt)
            return ChatClientResponse(response, request.context)
        metered = await meter.admit(model, prompt)
        try:
            await acheck_context_window(metered.model, prompt)
            response = await metered.model.call(prompt)
        except BaseException:
            metered.finished(None, (), completed=False)
            raise
        metered.finished(response.metadata.usage, (response.text,), completed=True)
        return ChatClientResponse(response, request.context)


class ChatModelStreamAdvisor(_ModelAdvisor, StreamAdvisor):
    """The innermost stream advisor: streams from the model (Spring AI ``ChatModelStreamAdvisor``).

    Named ``"stream"``, order ``LOWEST_PRECEDENCE``, always last. Applies format instructions
    as the call path does (Spring AI applies none in streams, seed §6.16.1 第三条), and honours
    ``CHAT_MODEL_OVERRIDE`` and checks the context window as the call advisor does (raised on
    the stream's first step, before the provider is called).
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        return "stream"

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        context = request.context
        model = self._model_for(request)
        prompt = augment_with_format_instructions(request)
        meter: ModelCallMeter | None = context.get(MODEL_CALL_METER)
        if meter is None:
            await acheck_context_window(model, prompt)
            stream = model.stream(prompt)
            async with closing_stream(stream) as chunks:
                async for chunk in chunks:
                    yield ChatClientResponse(chunk, context)
            return
        # Metered: what arrived is kept so an interrupted stream reports what it used.
        metered = await meter.admit(model, prompt)
        usages: list[Usage | None] = []
        texts: list[str] = []
        completed = False
        try:
            await acheck_context_window(metered.model, prompt)
            stream = metered.model.stream(prompt)
            async with closing_stream(stream) as chunks:
                async for chunk in chunks:
                    usages.append(chunk.metadata.usage)
                    texts.append(chunk.text)
                    yield ChatClientResponse(chunk, context)
            completed = True
        finally:
            metered.finished(combine_stream_usage(usages), texts, completed)
