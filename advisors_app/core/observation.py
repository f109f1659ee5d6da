"""The hook through which tracing and telemetry watch each advisor (Spring AI observations).

A chain built with an ``observer`` hands every advisor invocation to it; with no observer the
chain calls advisors directly and pays nothing. Implementations live outside the chain
(``advisors_app.core.tracing``): an OpenTelemetry span per advisor and a per-call trace.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from .requests import ChatClientRequest, ChatClientResponse

if TYPE_CHECKING:
    from .advisor import Advisor

__all__ = ["AdvisorObserver"]


class AdvisorObserver(Protocol):
    """Wraps each advisor invocation; must call ``proceed`` exactly once and return its result."""

    def observe_call(
        self,
        advisor: Advisor,
        request: ChatClientRequest,
        proceed: Callable[[ChatClientRequest], Awaitable[ChatClientResponse]],
    ) -> Awaitable[ChatClientResponse]: ...

    def observe_stream(
        self,
        advisor: Advisor,
        request: ChatClientRequest,
        proceed: Callable[[ChatClientRequest], AsyncIterator[ChatClientResponse]],
    ) -> AsyncIterator[ChatClientResponse]: ...
