"""The hook through which tracing and telemetry watch each advisor (Spring AI observations).

A chain built with an ``observer`` hands every advisor invocation to it; with no observer the
chain calls advisors directly and pays nothing. Implementations live outside the chain
(``advisors_app.core.tracing``): an OpenTelemetry span per advisor and a per-call trace.

An observer that also has the :class:`ToolCallObserver` methods is told about each tool call the
tool-calling advisor runs (:func:`tool_call_observer` finds them, through a
``CompositeObserver`` too): when it starts and how it ended. The turn service turns these into
the ``tool_call`` / ``tool_result`` events of a stream.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .requests import ChatClientRequest, ChatClientResponse

if TYPE_CHECKING:
    from .advisor import Advisor
    from .messages import ToolCall

__all__ = ["AdvisorObserver", "ToolCallObserver", "tool_call_observer"]


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


@runtime_checkable
class ToolCallObserver(Protocol):
    """Told about each tool call of a round, in the model's call order, as it starts and ends.

    ``ok`` is ``False`` when the call failed (bad arguments, an exception, an unknown tool, a
    limit); ``error`` is then the text the model receives instead of a result; ``duration`` is
    in seconds. Called on the event loop; must not block or raise.
    """

    def tool_call_started(self, call: ToolCall) -> None: ...

    def tool_call_finished(
        self, call: ToolCall, ok: bool, error: str | None, duration: float
    ) -> None: ...


def tool_call_observer(observer: Any) -> ToolCallObserver | None:
    """The :class:`ToolCallObserver` among ``observer`` (or the observers it composes)."""
    if isinstance(observer, ToolCallObserver):
        return observer
    for inner in getattr(observer, "observers", ()):
        found = tool_call_observer(inner)
        if found is not None:
            return found
    return None
