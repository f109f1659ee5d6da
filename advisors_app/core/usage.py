"""Usage across the rounds of one turn (Spring AI ``UsageAccumulator`` + ``UsageCalculator``).

Seed §6.12. A tool loop or a validation retry calls the model several times for one user turn;
the caller must see the sum (bug case B12). Divergences: ``None`` stays "unknown" instead of
becoming a zero usage, cached-token counts and per-round figures are kept (defect 5.4.32).
"""

from __future__ import annotations

from typing import overload

from .requests import ChatClientResponse
from .response import ChatResponse, ChatResponseMetadata, Usage

__all__ = ["UsageAccumulator", "usage_of"]


def usage_of(response: ChatClientResponse | ChatResponse | None) -> Usage | None:
    """The usage carried by a (client) response, or ``None``."""
    if isinstance(response, ChatClientResponse):
        response = response.chat_response
    return response.metadata.usage if response is not None else None


class UsageAccumulator:
    """Sums the usage of the rounds of one turn; create one per turn (it holds that turn's state).

    ``add_round_response`` records a round and returns the accumulated response;
    ``accumulated_usage`` is the sum of the non-empty round usages (``None`` if none reported
    any); ``round_usages`` keeps each round's figure; ``apply_accumulated_usage`` stamps the
    sum on a response.
    """

    __slots__ = ("_last", "_rounds", "_total")

    def __init__(self) -> None:
        self._total: Usage | None = None
        self._rounds: list[Usage | None] = []
        self._last: ChatClientResponse | None = None

    @overload
    def add_round_response(
        self, response: ChatClientResponse | ChatResponse
    ) -> ChatClientResponse: ...

    @overload
    def add_round_response(self, response: None) -> ChatClientResponse | None: ...

    def add_round_response(
        self, response: ChatClientResponse | ChatResponse | None
    ) -> ChatClientResponse | None:
        """Add one round's response (``None`` is ignored) and return
        :attr:`accumulated_response`: this round's response (a ``ChatResponse`` wrapped in a
        ``ChatClientResponse``) carrying the usage of every round so far, as Spring AI's
        ``addRoundResponse`` returns it. After a ``None``, the last round's, or ``None`` when
        no round was added."""
        if response is None:
            return self.accumulated_response
        usage = usage_of(response)
        self._rounds.append(usage)
        if usage is not None and not usage.is_empty:
            self._total = usage if self._total is None else self._total + usage
        if isinstance(response, ChatClientResponse):
            self._last = response
        else:
            self._last = ChatClientResponse(response)
        return self.apply_accumulated_usage(self._last)

    @property
    def accumulated_usage(self) -> Usage | None:
        return self._total

    @property
    def round_usages(self) -> tuple[Usage | None, ...]:
        """Each round's usage, in order (``None`` where a round reported none)."""
        return tuple(self._rounds)

    @property
    def accumulated_response(self) -> ChatClientResponse | None:
        """The last round's response carrying the accumulated usage."""
        return self.apply_accumulated_usage(self._last) if self._last is not None else None

    def apply_accumulated_usage(self, response: ChatClientResponse) -> ChatClientResponse:
        """``response`` with the accumulated usage; unchanged when nothing was accumulated."""
        chat_response = response.chat_response
        if (
            chat_response is None
            or self._total is None
            or chat_response.metadata.usage == self._total
        ):
            return response
        return response.mutate(chat_response=chat_response.with_usage(self._total))

    def usage_chunk(self, response: ChatClientResponse) -> ChatClientResponse | None:
        """A stream chunk with no generations that carries the accumulated usage, or ``None``.

        Streams that drop per-round usage from their chunks emit this last, so the consumer's
        aggregate holds the whole turn's usage.
        """
        if self._total is None:
            return None
        return ChatClientResponse(
            ChatResponse((), ChatResponseMetadata(usage=self._total)), response.context
        )
