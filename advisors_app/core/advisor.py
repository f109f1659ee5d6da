"""Advisor protocols (Spring AI ``Advisor``, ``CallAdvisor``, ``StreamAdvisor``, ``BaseAdvisor``).

An advisor is an ordered interceptor around the chat-model call. ``order`` decides position:
smaller is outer (its ``before`` runs first and its ``after`` last). Advisors are shared by
concurrent requests, so they keep no per-request state on ``self``; per-call state travels in
the request/response context (seed §6.14.11).

What an advisor *is* lives on its class, once: ``DEFAULT_ORDER``, ``ROLES`` (a set of
:class:`AdvisorRole`), ``STREAM_SAFE`` and ``AFTER_SIDE_EFFECTS``. ``ChatClient`` assembly reads
them from instances, and the advisor-type registry of the Django layer derives each built-in
type's metadata from them, so the chain lint applies the same rules to stored chains.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Sequence
from enum import StrEnum
from typing import Any, ClassVar

from .aggregation import ChatClientResponseAccumulator
from .requests import ChatClientRequest, ChatClientResponse
from .response import ChatResponse, ChatResponseMetadata
from .streams import closing_stream

__all__ = [
    "DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER",
    "DEFAULT_TOOL_CALLING_ORDER",
    "HIGHEST_PRECEDENCE",
    "LOWEST_PRECEDENCE",
    "Advisor",
    "AdvisorRole",
    "BaseAdvisor",
    "CallAdvisor",
    "CallAdvisorChain",
    "MemoryAdvisor",
    "StreamAdvisor",
    "StreamAdvisorChain",
    "ToolAdvisor",
    "has_role",
]

HIGHEST_PRECEDENCE = -(2**31)
LOWEST_PRECEDENCE = 2**31 - 1
#: Memory advisors wrap the tool loop (Spring AI 2.0 moved this from +1000 to +200).
DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER = HIGHEST_PRECEDENCE + 200
#: ``ToolCallingAdvisor.DEFAULT_ORDER``: inside memory, outside everything at order 0.
DEFAULT_TOOL_CALLING_ORDER = HIGHEST_PRECEDENCE + 300


class AdvisorRole(StrEnum):
    """What an advisor does in a chain: the one vocabulary of ``Advisor.ROLES``.

    ``ChatClient`` assembly and the chain lint both decide by role (at most one ``TOOL``
    advisor; a ``MEMORY`` advisor inside the tool loop is a mistake). Values are plain strings
    (``AdvisorRole.MEMORY == "memory"``), so stored or hand-written role names compare equal.
    """

    #: Owns the chat-memory lifecycle: adds the history, stores the turn (``MemoryAdvisor``).
    MEMORY = "memory"
    #: Runs the tool-calling loop, re-entering the rest of the chain per round (``ToolAdvisor``).
    TOOL = "tool"
    #: May refuse the request instead of calling the model (sensitive words, budgets).
    GUARD = "guard"
    #: Retrieves documents and puts them into the prompt.
    RAG = "rag"
    #: May answer from a cache instead of calling the model.
    CACHE = "cache"
    #: Observes only: logs, audits or times the call without changing it.
    LOGGING = "logging"
    #: Replaces the text of the user message on every request before the model sees it
    #: (masking, query rewriting, augmentation with retrieved context). A retry that appends a
    #: correction to a repeated call (``StructuredOutputValidationAdvisor``) is not a rewrite.
    REWRITE = "rewrite"


class Advisor:
    """Base of every advisor: a read-only ``name`` (the class name) and an ``order``.

    Subclasses may override either as a class attribute or a property, or set
    ``self.order = order`` in ``__init__``; they never need to call ``super().__init__()``.
    An instance that sets no order has its class's ``DEFAULT_ORDER``.

    Class metadata (read by ``ChatClient`` assembly and by the Django advisor-type registry):

    - ``DEFAULT_ORDER``: the order an instance gets when none is given (0).
    - ``ROLES``: what the advisor does (:class:`AdvisorRole`). A subclass's roles are its own
      plus every base's, so a subclass of ``ToolAdvisor`` is always a ``TOOL`` advisor; an
      unknown role raises ``ValueError`` when the class is defined.
    - ``STREAM_SAFE``: in a stream, work done after the model answers runs once, on the
      completed stream, never per chunk (``True``; ``BaseAdvisor`` guarantees it for ``after``).
    - ``AFTER_SIDE_EFFECTS``: that work writes somewhere outside the response (an audit log, a
      cache, chat memory); such an advisor must be ``STREAM_SAFE``.
    """

    __slots__ = ()
    DEFAULT_ORDER: ClassVar[int] = 0
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset()
    STREAM_SAFE: ClassVar[bool] = True
    AFTER_SIDE_EFFECTS: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        roles: set[AdvisorRole] = set()
        for role in cls.ROLES:
            try:
                roles.add(AdvisorRole(role))
            except ValueError:
                known = ", ".join(r.value for r in AdvisorRole)
                raise ValueError(
                    f"{cls.__qualname__}.ROLES: unknown role {role!r}; known: {known}"
                ) from None
        for base in cls.__bases__:
            roles.update(getattr(base, "ROLES", ()))
        cls.ROLES = frozenset(roles)

    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    def order(self) -> int:
        return getattr(self, "_order", self.DEFAULT_ORDER)

    @order.setter
    def order(self, value: int) -> None:
        # Kept in the instance's ``_order``: its __dict__, or the slot a subclass with
        # __slots__ declares (this class has none, so plain assignment would not type-check).
        object.__setattr__(self, "_order", value)

    def __repr__(self) -> str:
        return f"{self.name}(order={self.order})"


class CallAdvisor(Advisor):
    """An advisor of calls: ``await chain.next_call(request)`` runs the rest of the chain."""

    __slots__ = ()

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        raise NotImplementedError(f"{type(self).__name__} must implement advise_call")


class StreamAdvisor(Advisor):
    """An advisor of streams: ``chain.next_stream(request)`` yields the rest of the chain's chunks.

    ``advise_stream`` must be lazy (an async generator): work and errors happen while the
    caller iterates. When the caller stops early it closes the iterator; close the downstream
    iterator too (:class:`~advisors_app.core.streams.closing_stream`) so the model request
    is cancelled.
    """

    __slots__ = ()

    def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        raise NotImplementedError(f"{type(self).__name__} must implement advise_stream")


# The chains' interfaces live beside the advisors' (Spring's advisor.api package): an advisor
# receives the rest of its chain; implementations are in :mod:`.chain`.


class CallAdvisorChain:
    """What a ``CallAdvisor`` receives: the rest of the chain for a call."""

    __slots__ = ()

    async def next_call(self, request: ChatClientRequest) -> ChatClientResponse:
        raise NotImplementedError

    @property
    def call_advisors(self) -> Sequence[CallAdvisor]:
        raise NotImplementedError

    def copy(self, after: Advisor) -> CallAdvisorChain:
        raise NotImplementedError


class StreamAdvisorChain:
    """What a ``StreamAdvisor`` receives: the rest of the chain for a stream."""

    __slots__ = ()

    def next_stream(self, request: ChatClientRequest) -> AsyncIterator[ChatClientResponse]:
        raise NotImplementedError

    @property
    def stream_advisors(self) -> Sequence[StreamAdvisor]:
        raise NotImplementedError

    def copy(self, after: Advisor) -> StreamAdvisorChain:
        raise NotImplementedError


class MemoryAdvisor(Advisor):
    """Marker: the advisor owns the chat-memory lifecycle (Spring AI ``MemoryAdvisor``).

    Inheriting it gives the class the :attr:`AdvisorRole.MEMORY` role, which is what chain
    assembly checks (an advisor may also declare the role in ``ROLES`` without the marker).
    """

    __slots__ = ()
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.MEMORY})


class ToolAdvisor(Advisor):
    """Marker: the advisor owns the tool-calling loop; at most one per chain.

    Inheriting it gives the class the :attr:`AdvisorRole.TOOL` role, which is what chain
    assembly checks (an advisor may also declare the role in ``ROLES`` without the marker).
    """

    __slots__ = ()
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.TOOL})


def has_role(advisor: Advisor | type[Advisor], role: AdvisorRole) -> bool:
    """True when ``advisor`` (an instance or a class) has ``role`` in its ``ROLES``."""
    return role in advisor.ROLES


class _Hooks:
    """How a ``BaseAdvisor`` subclass's hooks must be invoked, worked out once per class."""

    __slots__ = ("after_async", "after_default", "before_async", "before_default")

    def __init__(self, cls: type[BaseAdvisor]) -> None:
        self.before_default = cls.before is BaseAdvisor.before
        self.after_default = cls.after is BaseAdvisor.after
        self.before_async = inspect.iscoroutinefunction(cls.before)
        self.after_async = inspect.iscoroutinefunction(cls.after)


class BaseAdvisor(CallAdvisor, StreamAdvisor):
    """Write ``before`` and ``after``; calls and streams run them (Spring AI ``BaseAdvisor``).

    ``before(request, chain)`` returns the request to send on; ``after(response, chain)`` the
    response to return. Either may be a plain function or ``async def``. Plain hooks run on the
    event loop with no thread hop; set ``blocking = True`` on a class whose plain hooks block
    (ORM, file or network I/O) and they run in a worker thread instead.

    Streams (divergence from Spring AI, seed §6.16.2 #1 and defect 5.1.4): chunks pass through
    as they arrive, and ``after`` runs **exactly once**, on the aggregated response, when the
    stream completes normally, whether or not the provider sent a finish reason. Its result is
    not re-emitted as text: context keys and response-metadata entries it adds reach the
    consumer as one trailing chunk without generations. An advisor that must rewrite streamed
    text overrides ``advise_stream``. Errors pass through with their original type (Spring
    wraps them in ``IllegalStateException``, defect 5.1.5).
    """

    __slots__ = ()
    blocking: ClassVar[bool] = False
    _hooks: ClassVar[_Hooks]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._hooks = _Hooks(cls)

    def before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        return request

    def after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        return response

    async def _run_before(self, request: ChatClientRequest, chain: Any) -> ChatClientRequest:
        hooks = self._hooks
        if hooks.before_async:
            result: ChatClientRequest = await self.before(request, chain)  # type: ignore[misc]
        elif self.blocking:
            result = await asyncio.to_thread(self.before, request, chain)
        else:
            result = self.before(request, chain)
        if result is None:
            raise ValueError(
                f"{self.name}.before() returned None; it must return a ChatClientRequest"
            )
        return result

    async def _run_after(self, response: ChatClientResponse, chain: Any) -> ChatClientResponse:
        hooks = self._hooks
        if hooks.after_async:
            result: ChatClientResponse = await self.after(response, chain)  # type: ignore[misc]
        elif self.blocking:
            result = await asyncio.to_thread(self.after, response, chain)
        else:
            result = self.after(response, chain)
        if result is None:
            raise ValueError(
                f"{self.name}.after() returned None; it must return a ChatClientResponse"
            )
        return result

    async def advise_call(
        self, request: ChatClientRequest, chain: CallAdvisorChain
    ) -> ChatClientResponse:
        if request is None:
            raise ValueError("chatClientRequest cannot be null")
        hooks = self._hooks
        if not hooks.before_default:
            request = await self._run_before(request, chain)
        response = await chain.next_call(request)
        if hooks.after_default:
            return response
        return await self._run_after(response, chain)

    async def advise_stream(
        self, request: ChatClientRequest, chain: StreamAdvisorChain
    ) -> AsyncIterator[ChatClientResponse]:
        hooks = self._hooks
        if not hooks.before_default:
            request = await self._run_before(request, chain)
        stream = chain.next_stream(request)
        if hooks.after_default:
            async with closing_stream(stream) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        accumulator = ChatClientResponseAccumulator()
        async with closing_stream(stream) as chunks:
            async for chunk in chunks:
                accumulator.add(chunk)
                yield chunk
        aggregated = accumulator.result()
        finished = await self._run_after(aggregated, chain)
        trailer = trailing_chunk(aggregated, finished)
        if trailer is not None:
            yield trailer


def trailing_chunk(
    aggregated: ChatClientResponse, finished: ChatClientResponse
) -> ChatClientResponse | None:
    """The chunk that carries what a stream ``after`` added: changed metadata and context.

    Returns ``None`` when ``after`` changed neither. The chunk has no generations and no usage,
    so consumers that concatenate text or add up usage are unaffected.
    """
    if finished is aggregated:
        return None
    old_extra = aggregated.chat_response.metadata.extra if aggregated.chat_response else {}
    new_extra = finished.chat_response.metadata.extra if finished.chat_response else {}
    changed = {k: v for k, v in new_extra.items() if k not in old_extra or old_extra[k] is not v}
    if not changed and finished.context == aggregated.context:
        return None
    chat_response = ChatResponse((), ChatResponseMetadata(extra=changed)) if changed else None
    return ChatClientResponse(chat_response, finished.context)


BaseAdvisor._hooks = _Hooks(BaseAdvisor)
