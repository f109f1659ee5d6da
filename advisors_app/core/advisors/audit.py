"""``AuditAdvisor``: writes one audit record per call or stream through a sink.

Recipe 6 of seed §6.15 ("审计 advisor"), side-effect safe in streams.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from ..advisor import HIGHEST_PRECEDENCE, AdvisorRole, CallAdvisor, StreamAdvisor
from ..aggregation import ChatClientResponseAccumulator
from ..attributes import CONVERSATION_ID
from ..requests import ChatClientRequest, ChatClientResponse
from ..serialization import to_jsonable
from ..streams import closing_stream

__all__ = ["AuditAdvisor", "AuditRecord", "AuditSink", "InMemoryAuditSink"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """What happened in one call: the request as the advisor saw it and how it ended.

    ``status`` is ``"completed"``, ``"error"`` (``error`` holds ``"Type: message"``) or
    ``"interrupted"`` (a stream closed or cancelled before its end; ``response_text`` holds
    what was streamed until then). ``duration`` is in seconds; ``usage`` is
    ``Usage.to_dict()`` or ``None``; ``prompt`` the messages as ``Message.to_dict()``;
    ``context`` the response context (or the request's) as JSON-compatible data.
    """

    mode: str
    status: str
    conversation_id: str | None
    request_text: str
    prompt: list[dict[str, Any]]
    response_text: str | None
    finish_reason: str | None
    usage: dict[str, Any] | None
    started_at: dt.datetime
    duration: float
    error: str | None = None
    context: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["started_at"] = self.started_at.isoformat()
        return data


@runtime_checkable
class AuditSink(Protocol):
    """Where audit records go: ``await sink.write(record)`` (a database, a log, a queue)."""

    async def write(self, record: AuditRecord) -> None: ...


class InMemoryAuditSink:
    """Keeps records in ``records`` (tests, demos); Django's is ``advisors_app.stores.audit``."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []

    async def write(self, record: AuditRecord) -> None:
        self.records.append(record)


class AuditAdvisor(CallAdvisor, StreamAdvisor):
    """Writes exactly one :class:`AuditRecord` per call or stream to ``sink``.

    The record is written when the answer is complete, when the chain raised (then the
    original error propagates, and a failing sink is only logged) or when a stream is closed
    or cancelled early (``"interrupted"``, with the text streamed so far): never per chunk,
    never twice, never skipped because a provider sent no finish reason. A sink failure on a
    completed answer propagates, so a missing audit trail is not silent.

    Default order ``HIGHEST_PRECEDENCE + 100``: outermost, so it sees the request as the client
    sent it (before memory, RAG and PII masking) and the final answer and context (refusals'
    reasons such as ``safeguard_matched`` or ``budget_guard_reason`` included).

    Divergences from the seed's recipe: one record per call instead of a request and a
    response write (a failed call left a request without an answer), status/usage/duration
    fields, a stream-safe write (the recipe's ``after`` depends on the finish reason), and a
    guard against responses without generations.
    """

    __slots__ = ("_order", "_sink")

    DEFAULT_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 100
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.LOGGING})
    AFTER_SIDE_EFFECTS: ClassVar[bool] = True

    def __init__(self, sink: AuditSink, order: int = DEFAULT_ORDER) -> None:
        if sink is None:
            raise ValueError("sink must not be null")
        self._sink = sink
        self._order = order

    def _record(
        self,
        mode: str,
        status: str,
        request: ChatClientRequest,
        response: ChatClientResponse | None,
        started: tuple[dt.datetime, float],
        error: BaseException | None = None,
    ) -> AuditRecord:
        chat_response = response.chat_response if response is not None else None
        result = chat_response.result if chat_response is not None else None
        usage = chat_response.metadata.usage if chat_response is not None else None
        context = response.context if response is not None else request.context
        conversation = context.get(CONVERSATION_ID, request.context.get(CONVERSATION_ID))
        return AuditRecord(
            mode=mode,
            status=status,
            conversation_id=None if conversation is None else str(conversation),
            request_text=request.prompt.user_message.text,
            prompt=[m.to_dict() for m in request.prompt.instructions],
            response_text=chat_response.text if chat_response is not None else None,
            finish_reason=result.finish_reason if result is not None else None,
            usage=usage.to_dict() if usage is not None else None,
            started_at=started[0],
            duration=time.perf_counter() - started[1],
            error=None if error is None else f"{type(error).__name__}: {error}",
            context=to_jsonable(context, max_text=2000),
        )

    async def _write_after_failure(self, record: AuditRecord) -> None:
        try:
            await self._sink.write(record)
        except Exception:
            logger.exception("%s could not write the audit record of a failed call", self.name)

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        started = (dt.datetime.now(dt.UTC), time.perf_counter())
        try:
            response: ChatClientResponse = await chain.next_call(request)
        except asyncio.CancelledError:
            await self._write_after_failure(
                self._record("call", "interrupted", request, None, started)
            )
            raise
        except Exception as exc:
            await self._write_after_failure(
                self._record("call", "error", request, None, started, exc)
            )
            raise
        await self._sink.write(self._record("call", "completed", request, response, started))
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        started = (dt.datetime.now(dt.UTC), time.perf_counter())
        accumulator = ChatClientResponseAccumulator()
        seen = False
        try:
            async with closing_stream(chain.next_stream(request)) as chunks:
                async for chunk in chunks:
                    accumulator.add(chunk)
                    seen = True
                    yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            partial = accumulator.result() if seen else None
            await self._write_after_failure(
                self._record("stream", "interrupted", request, partial, started)
            )
            raise
        except Exception as exc:
            partial = accumulator.result() if seen else None
            await self._write_after_failure(
                self._record("stream", "error", request, partial, started, exc)
            )
            raise
        aggregated = accumulator.result() if seen else None
        await self._sink.write(self._record("stream", "completed", request, aggregated, started))
