"""``ScriptedChatModel``: the shipped fake chat model, for tests and demos without a model.

Like httpx's ``MockTransport`` or Pydantic AI's ``FunctionModel``, it is part of the product: a
chain can be exercised end to end, deterministically, and the prompts it sent inspected.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any, TypeAlias

from ..aggregation import ChatResponseAccumulator
from ..exceptions import AdvisorStateError
from ..messages import AssistantMessage
from ..prompt import ChatOptions, Prompt
from ..response import ChatGenerationMetadata, ChatResponse, Generation

__all__ = ["ScriptItem", "ScriptedChatModel"]

Chunk: TypeAlias = str | ChatResponse | BaseException
ScriptItem: TypeAlias = (
    str | ChatResponse | BaseException | Sequence[Chunk] | Callable[[Prompt], Any]
)


def _chunk_response(chunk: str | ChatResponse) -> ChatResponse:
    if isinstance(chunk, ChatResponse):
        return chunk
    return ChatResponse((Generation(AssistantMessage(chunk)),))


class ScriptedChatModel:
    """A chat model that answers from a script, one item per ``call()`` or ``stream()``.

    Items: a ``str`` is one generation with finish reason ``"STOP"``; a ``ChatResponse`` is
    returned as is; a list is a chunk sequence (``str`` chunks carry no finish reason; a
    ``ChatResponse`` chunk is sent as is; an exception instance is raised at that point of the
    stream) and ``call()`` returns its aggregate; an exception instance is raised; a callable
    receives the prompt and returns any of these (it may be ``async``).

    ``stream()`` of a non-list item yields it as one chunk. ``chunk_delay`` (seconds) is slept
    before each streamed chunk. With ``repeat=True`` the script cycles forever; otherwise an
    exhausted script raises :class:`AdvisorStateError`. ``prompts`` records each prompt when its
    call or stream starts; ``events`` records ``"call"``, ``"stream"``, ``"complete"``,
    ``"cancel"`` and ``"error"`` so tests can see whether a stream was closed early.
    """

    def __init__(
        self,
        responses: Iterable[ScriptItem] = (),
        *,
        default_options: ChatOptions | None = None,
        chunk_delay: float = 0.0,
        repeat: bool = False,
    ) -> None:
        self._script = list(responses)
        self._repeat = repeat
        self._cursor: Iterator[ScriptItem] = (
            itertools.cycle(self._script) if repeat else iter(self._script)
        )
        self._consumed = 0
        self._lock = threading.Lock()
        self._default_options = default_options
        self.chunk_delay = chunk_delay
        self.prompts: list[Prompt] = []
        self.events: list[str] = []

    @property
    def default_options(self) -> ChatOptions | None:
        return self._default_options

    def add(self, *items: ScriptItem) -> None:
        """Append items to a non-repeating script."""
        if self._repeat:
            raise AdvisorStateError("cannot extend a repeating script")
        with self._lock:
            remaining = list(self._cursor)
            self._cursor = iter([*remaining, *items])
            self._script.extend(items)

    @property
    def remaining(self) -> int:
        """How many scripted items are left (``0`` for a repeating script that is empty)."""
        return len(self._script) - self._consumed if not self._repeat else len(self._script)

    async def _next_item(self, prompt: Prompt) -> Any:
        with self._lock:
            self.prompts.append(prompt)
            try:
                item = next(self._cursor)
            except StopIteration:
                raise AdvisorStateError(
                    f"ScriptedChatModel script is exhausted after {self._consumed} response(s)"
                ) from None
            self._consumed += 1
        while callable(item) and not isinstance(
            item, (str, ChatResponse, BaseException, list, tuple)
        ):
            item = item(prompt)
            if inspect.isawaitable(item):
                item = await item
        return item

    async def call(self, prompt: Prompt) -> ChatResponse:
        self.events.append("call")
        item = await self._next_item(prompt)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, str):
            return ChatResponse.of_text(item)
        if isinstance(item, ChatResponse):
            return item
        accumulator = ChatResponseAccumulator()
        for chunk in item:
            if isinstance(chunk, BaseException):
                raise chunk
            accumulator.add(_chunk_response(chunk))
        return accumulator.result()

    async def stream(self, prompt: Prompt) -> AsyncIterator[ChatResponse]:
        self.events.append("stream")
        item = await self._next_item(prompt)
        chunks: Sequence[Chunk]
        if isinstance(item, str):
            chunks = [
                ChatResponse((Generation(AssistantMessage(item), ChatGenerationMetadata("STOP")),))
            ]
        elif isinstance(item, (ChatResponse, BaseException)):
            chunks = [item]
        else:
            chunks = item
        try:
            for chunk in chunks:
                if self.chunk_delay:
                    await asyncio.sleep(self.chunk_delay)
                if isinstance(chunk, BaseException):
                    raise chunk
                yield _chunk_response(chunk)
        except (GeneratorExit, asyncio.CancelledError):
            self.events.append("cancel")
            raise
        except BaseException:
            self.events.append("error")
            raise
        self.events.append("complete")
