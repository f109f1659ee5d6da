"""``SimpleLoggerAdvisor``: logs each request and response at DEBUG (Spring AI, seed §6.1)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

from ..advisor import AdvisorRole, CallAdvisor, StreamAdvisor
from ..aggregation import ChatResponseAccumulator
from ..requests import ChatClientRequest, ChatClientResponse
from ..response import ChatResponse
from ..serialization import to_json
from ..streams import closing_stream

__all__ = ["DEFAULT_REQUEST_TO_STRING", "DEFAULT_RESPONSE_TO_STRING", "SimpleLoggerAdvisor"]

logger = logging.getLogger(__name__)


def _request_to_string(request: ChatClientRequest | None) -> str:
    return repr(request) if request is not None else "null"


def _response_to_string(response: ChatResponse | None) -> str:
    return to_json(response) if response is not None else "null"


#: ``repr`` of the request: ``ChatClientRequest(prompt=Prompt(messages=[...]), context={...})``.
DEFAULT_REQUEST_TO_STRING: Callable[[ChatClientRequest | None], str] = _request_to_string
#: Pretty-printed JSON of the ``ChatResponse`` (``results`` with ``finish_reason``, ``metadata``).
DEFAULT_RESPONSE_TO_STRING: Callable[[ChatResponse | None], str] = _response_to_string


class SimpleLoggerAdvisor(CallAdvisor, StreamAdvisor):
    """Logs ``"request: ..."`` before and ``"response: ..."`` after the rest of the chain.

    Logger: ``advisors_app.core.advisors.simple_logger`` at DEBUG (enable it, or the
    ``advisors_app`` logger, to see the lines). ``request_to_string(request)`` and
    ``response_to_string(chat_response)`` format the two lines; ``None`` selects the defaults
    (:data:`DEFAULT_REQUEST_TO_STRING`, :data:`DEFAULT_RESPONSE_TO_STRING`). Requests and
    responses pass through untouched: same objects, usage, ids and metadata. In a stream the
    chunks pass through as they arrive and the aggregated response is logged once, when the
    stream completes (Spring AI's ``ChatClientMessageAggregator`` behaviour).

    Divergences from Spring AI ``SimpleLoggerAdvisor``: nothing is formatted when DEBUG is off
    (Spring builds both strings on every call), and a stream that fails or is closed early logs
    ``"response: <error ...>"`` / ``"response: <interrupted>"`` instead of nothing, so a log
    reader can tell a lost answer from a missing one.
    """

    __slots__ = ("_order", "_request_to_string", "_response_to_string")

    DEFAULT_ORDER: ClassVar[int] = 0
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.LOGGING})

    def __init__(
        self,
        request_to_string: Callable[[ChatClientRequest | None], str] | None = None,
        response_to_string: Callable[[ChatResponse | None], str] | None = None,
        order: int = DEFAULT_ORDER,
    ) -> None:
        self._request_to_string = request_to_string or DEFAULT_REQUEST_TO_STRING
        self._response_to_string = response_to_string or DEFAULT_RESPONSE_TO_STRING
        self._order = order

    def __repr__(self) -> str:
        # Constant, as Spring AI's toString(): the formatter functions say nothing useful.
        return "SimpleLoggerAdvisor"

    def _log_request(self, request: ChatClientRequest) -> None:
        logger.debug("request: %s", self._request_to_string(request))

    def _log_response(self, response: ChatResponse | None) -> None:
        logger.debug("response: %s", self._response_to_string(response))

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        if not logger.isEnabledFor(logging.DEBUG):
            passed: ChatClientResponse = await chain.next_call(request)
            return passed
        self._log_request(request)
        response: ChatClientResponse = await chain.next_call(request)
        self._log_response(response.chat_response)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        enabled = logger.isEnabledFor(logging.DEBUG)
        if enabled:
            self._log_request(request)
        async with closing_stream(chain.next_stream(request)) as chunks:
            if not enabled:
                async for chunk in chunks:
                    yield chunk
                return
            accumulator = ChatResponseAccumulator()
            seen = False
            try:
                async for chunk in chunks:
                    if chunk.chat_response is not None:
                        seen = True
                        accumulator.add(chunk.chat_response)
                    yield chunk
            except (GeneratorExit, asyncio.CancelledError):
                logger.debug("response: <interrupted>")
                raise
            except BaseException as exc:
                logger.debug("response: <error %s: %s>", type(exc).__name__, exc)
                raise
        self._log_response(accumulator.result() if seen else None)
