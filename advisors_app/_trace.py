"""A minimal per-call trace observer, in the shape of ``advisors_app.core.tracing.CallTrace``.

Stands in until the core's ``CallTrace`` is available; ``to_dict()`` has the same shape:
``{"duration": s, "entries": [{"index", "parent", "name", "order", "mode", "started",
"request", "response", "duration", "first_chunk", "chunks", "usage", "status", "error",
"self_duration"}]}`` (times in seconds; ``request`` holds the prompt's messages and options).
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from advisors_app.core.aggregation import ChatClientResponseAccumulator
from advisors_app.core.requests import ChatClientRequest, ChatClientResponse
from advisors_app.core.streams import closing_stream

__all__ = ["CallTrace"]

_current: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar(
    "advisors_app_turn_trace", default=None
)


def _text(value: str, limit: int | None) -> str:
    if limit is not None and len(value) > limit:
        return value[:limit] + f"… [{len(value) - limit} more chars]"
    return value


def _request(request: ChatClientRequest, limit: int | None) -> dict[str, Any]:
    messages = []
    for message in request.prompt.instructions:
        data = message.to_dict()
        if isinstance(data.get("text"), str):
            data["text"] = _text(data["text"], limit)
        messages.append(data)
    options = request.prompt.options
    return {"messages": messages, "options": options.to_dict() if options is not None else None}


def _response(response: ChatClientResponse | None, limit: int | None) -> dict[str, Any] | None:
    chat = response.chat_response if response is not None else None
    if chat is None:
        return None
    return {"text": _text(chat.text, limit)}


class CallTrace:
    """Records every advisor invocation of one call (an ``AdvisorObserver``)."""

    def __init__(self, *, max_text: int | None = 2000, capture_payloads: bool = True) -> None:
        self.entries: list[dict[str, Any]] = []
        self._max_text = max_text
        self._capture = capture_payloads
        self._origin = time.perf_counter()

    def _open(self, advisor: Any, request: ChatClientRequest, mode: str) -> dict[str, Any]:
        current = _current.get()
        entry = {
            "index": len(self.entries),
            "parent": current[1] if current is not None and current[0] == id(self) else None,
            "name": advisor.name,
            "order": advisor.order,
            "mode": mode,
            "started": time.perf_counter() - self._origin,
            "request": _request(request, self._max_text) if self._capture else None,
            "response": None,
            "duration": None,
            "first_chunk": None,
            "chunks": 0,
            "usage": None,
            "status": "running",
            "error": None,
        }
        self.entries.append(entry)
        return entry

    def _close(self, entry: dict[str, Any], response: Any, status: str, exc: Any = None) -> None:
        entry["duration"] = time.perf_counter() - self._origin - entry["started"]
        entry["status"] = status
        if exc is not None:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        chat = response.chat_response if response is not None else None
        usage = chat.metadata.usage if chat is not None else None
        entry["usage"] = usage.to_dict() if usage is not None else None
        if self._capture:
            entry["response"] = _response(response, self._max_text)

    async def observe_call(
        self,
        advisor: Any,
        request: ChatClientRequest,
        proceed: Callable[[ChatClientRequest], Awaitable[ChatClientResponse]],
    ) -> ChatClientResponse:
        entry = self._open(advisor, request, "call")
        token = _current.set((id(self), entry["index"]))
        try:
            response = await proceed(request)
        except asyncio.CancelledError:
            self._close(entry, None, "cancelled")
            raise
        except BaseException as exc:
            self._close(entry, None, "error", exc)
            raise
        finally:
            _current.reset(token)
        self._close(entry, response, "ok")
        return response

    async def observe_stream(
        self,
        advisor: Any,
        request: ChatClientRequest,
        proceed: Callable[[ChatClientRequest], AsyncIterator[ChatClientResponse]],
    ) -> AsyncIterator[ChatClientResponse]:
        entry = self._open(advisor, request, "stream")
        accumulator = ChatClientResponseAccumulator()
        try:
            async with closing_stream(proceed(request)) as chunks:
                while True:
                    token = _current.set((id(self), entry["index"]))
                    try:
                        chunk = await anext(chunks)
                    except StopAsyncIteration:
                        break
                    finally:
                        _current.reset(token)
                    if entry["first_chunk"] is None:
                        entry["first_chunk"] = time.perf_counter() - self._origin - entry["started"]
                    entry["chunks"] += 1
                    accumulator.add(chunk)
                    yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            self._close(entry, accumulator.result() if entry["chunks"] else None, "cancelled")
            raise
        except BaseException as exc:
            self._close(entry, accumulator.result() if entry["chunks"] else None, "error", exc)
            raise
        self._close(entry, accumulator.result() if entry["chunks"] else None, "ok")

    def to_dict(self) -> dict[str, Any]:
        children: dict[int, float] = {}
        for entry in self.entries:
            if entry["parent"] is not None and entry["duration"] is not None:
                children[entry["parent"]] = children.get(entry["parent"], 0.0) + entry["duration"]
        entries = []
        for entry in self.entries:
            data = dict(entry)
            data["self_duration"] = (
                None
                if entry["duration"] is None
                else entry["duration"] - children.get(entry["index"], 0.0)
            )
            entries.append(data)
        roots = [e for e in self.entries if e["parent"] is None]
        duration = None
        if roots and all(e["duration"] is not None for e in roots):
            duration = max(e["started"] + e["duration"] for e in roots) - min(
                e["started"] for e in roots
            )
        return {"duration": duration, "entries": entries}
