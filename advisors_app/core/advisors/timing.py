"""``TimingAdvisor``: measures the time to the first token and the total time of a call.

The timing advisors of seed 003 §5–§6 (``TimingAdvisor``, ``StreamTimingAdvisor``) as one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ..advisor import AdvisorRole, CallAdvisor, StreamAdvisor
from ..requests import ChatClientRequest, ChatClientResponse
from ..streams import closing_stream
from ._support import metadata_chunk

__all__ = ["TIME_TO_FIRST_TOKEN", "TOTAL_TIME", "TimingAdvisor"]

logger = logging.getLogger(__name__)

#: Context and metadata key: seconds from this advisor's start to the first chunk with text
#: or tool calls (streams only; ``None`` for calls, which have no first token of their own).
TIME_TO_FIRST_TOKEN = "time_to_first_token"
#: Context and metadata key: seconds from this advisor's start to the complete answer.
TOTAL_TIME = "total_time"


class TimingAdvisor(CallAdvisor, StreamAdvisor):
    """Puts :data:`TIME_TO_FIRST_TOKEN` and :data:`TOTAL_TIME` (seconds) on the response.

    Measured with ``time.perf_counter`` from the moment the chain reaches this advisor, so
    they include every advisor inside it (default order 100, as in seed 003: after the
    order-0 advisors such as RAG and guards, before the model). The values go into the response
    context and metadata (in a stream, one trailing chunk after the last one) and one log
    line per call is written at INFO on ``advisors_app.core.advisors.timing``
    (``"chat call elapsed=...s"`` / ``"chat stream elapsed=...s ttft=...s signal=..."`` with
    signal ``complete``, ``error`` or ``cancel``, as the seed's ``doFinally``). No text is
    logged.

    Divergences from the seed: one advisor for calls and streams, seconds as floats instead
    of log-only milliseconds, and the figures in the response for traces and the admin.
    """

    __slots__ = ("_order",)

    DEFAULT_ORDER: ClassVar[int] = 100
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.LOGGING})

    def __init__(self, order: int = DEFAULT_ORDER) -> None:
        self._order = order

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        started = time.perf_counter()
        try:
            response: ChatClientResponse = await chain.next_call(request)
        finally:
            elapsed = time.perf_counter() - started
            logger.info("chat call elapsed=%.3fs", elapsed)
        extra = {TIME_TO_FIRST_TOKEN: None, TOTAL_TIME: elapsed}
        chat_response = response.chat_response
        return response.mutate(
            chat_response=chat_response.with_metadata(**extra) if chat_response else None,
            context=extra,
        )

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        started = time.perf_counter()
        first: float | None = None
        signal = "cancel"
        context: Any = request.context
        try:
            async with closing_stream(chain.next_stream(request)) as chunks:
                async for chunk in chunks:
                    if first is None and _has_content(chunk):
                        first = time.perf_counter() - started
                    context = chunk.context
                    yield chunk
            signal = "complete"
        except (GeneratorExit, asyncio.CancelledError):
            raise
        except BaseException:
            signal = "error"
            raise
        finally:
            elapsed = time.perf_counter() - started
            logger.info(
                "chat stream elapsed=%.3fs ttft=%s signal=%s",
                elapsed,
                "-" if first is None else f"{first:.3f}s",
                signal,
            )
        yield metadata_chunk(context, {TIME_TO_FIRST_TOKEN: first, TOTAL_TIME: elapsed})


def _has_content(chunk: ChatClientResponse) -> bool:
    response = chunk.chat_response
    return response is not None and any(g.text or g.output.tool_calls for g in response.generations)
