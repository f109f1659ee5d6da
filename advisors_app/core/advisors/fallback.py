"""``FallbackAdvisor``: retries the rest of the chain on other chat models when a model fails.

Recipe 3 of seed §6.15 ("降级 advisor"), with the flaw the seed points out fixed.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterable
from typing import Any, ClassVar

from ..advisor import LOWEST_PRECEDENCE, CallAdvisor, StreamAdvisor
from ..attributes import CHAT_MODEL_OVERRIDE
from ..exceptions import ModelFailure
from ..model import ChatModel
from ..requests import ChatClientRequest, ChatClientResponse
from ..streams import closing_stream
from ._support import metadata_chunk

__all__ = ["FALLBACK_ERRORS", "FALLBACK_MODEL_INDEX", "FallbackAdvisor"]

logger = logging.getLogger(__name__)

#: Context and metadata key: which model answered, 1 for the first fallback model and so on
#: (absent when the primary model answered).
FALLBACK_MODEL_INDEX = "fallback_model_index"
#: Context and metadata key: the failures absorbed, as ``"ErrorType: message"`` strings.
FALLBACK_ERRORS = "fallback_errors"


def _has_content(chunk: ChatClientResponse) -> bool:
    response = chunk.chat_response
    return response is not None and any(g.text or g.output.tool_calls for g in response.generations)


class FallbackAdvisor(CallAdvisor, StreamAdvisor):
    """Runs the rest of the chain again with the next of ``fallback_models`` on a model failure.

    Only :class:`~advisors_app.core.exceptions.ModelFailure` errors switch models (timeouts,
    5xx, 429, connection errors, cut or malformed streams), or the narrower ``retry_on``
    subclasses of it. Everything else propagates unchanged: a guard's refusal is an answer, not
    an error, and a ``BadRequestError``, ``AuthenticationError``, ``OutputValidationError`` or
    ``ValueError`` would fail the same way on any model, or must not be bypassed. The chat model
    is swapped through the :data:`~advisors_app.core.attributes.CHAT_MODEL_OVERRIDE` context key,
    which the model advisors honour; the advisors between this one and the model run again for
    each model. When every model failed, the last failure is raised.

    Streams switch only while nothing has reached the consumer: chunks without text or tool
    calls are held until the first one with content; after that, a failure propagates (text
    from two models must not be spliced together). A fallback answer carries
    :data:`FALLBACK_MODEL_INDEX` and :data:`FALLBACK_ERRORS` in its context and metadata (in
    a stream, in one trailing chunk).

    Default order ``LOWEST_PRECEDENCE - 1000``: inside the tool loop, memory, guards and
    ``StructuredOutputValidationAdvisor`` (``LOWEST_PRECEDENCE - 2000``), so a retry re-runs
    only the model. ``fallback_models`` must not be empty (``ValueError``).

    Divergence from the seed's recipe: the recipe catches every exception of the whole
    downstream chain, so a security refusal or validation failure raised inside it would be
    re-run on the fallback model (the bypass the seed's thinking question 5 asks about), and
    it calls the fallback model directly, skipping the inner advisors.
    """

    __slots__ = ("_models", "_order", "_retry_on")

    DEFAULT_ORDER: ClassVar[int] = LOWEST_PRECEDENCE - 1000

    def __init__(
        self,
        fallback_models: ChatModel | Iterable[ChatModel],
        order: int = DEFAULT_ORDER,
        *,
        retry_on: tuple[type[ModelFailure], ...] = (ModelFailure,),
    ) -> None:
        if fallback_models is None:
            raise ValueError("fallbackModels must not be null")
        if hasattr(fallback_models, "call") and hasattr(fallback_models, "stream"):
            models: tuple[Any, ...] = (fallback_models,)
        else:
            models = tuple(fallback_models)
        if not models or any(m is None for m in models):
            raise ValueError("fallbackModels must not be empty or contain null elements")
        for kind in retry_on:
            if not (isinstance(kind, type) and issubclass(kind, ModelFailure)):
                raise ValueError(
                    f"retry_on accepts ModelFailure subclasses only, got {kind!r}: other errors "
                    "(refusals, bad requests, authentication, validation) must not switch models"
                )
        self._models = models
        self._order = order
        self._retry_on = tuple(retry_on)

    def _attempt(self, request: ChatClientRequest, index: int) -> ChatClientRequest:
        if index == 0:
            return request
        return request.mutate(context={CHAT_MODEL_OVERRIDE: self._models[index - 1]})

    def _absorb(self, index: int, errors: list[str], exc: BaseException) -> None:
        errors.append(f"{type(exc).__name__}: {exc}")
        logger.warning(
            "%s: model %d failed (%s: %s); trying fallback model %d",
            self.name,
            index,
            type(exc).__name__,
            exc,
            index + 1,
        )

    @staticmethod
    def _extra(index: int, errors: list[str]) -> dict[str, Any]:
        return {FALLBACK_MODEL_INDEX: index, FALLBACK_ERRORS: list(errors)}

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        errors: list[str] = []
        last = len(self._models)
        for index in range(last + 1):
            try:
                response: ChatClientResponse = await chain.next_call(self._attempt(request, index))
            except self._retry_on as exc:
                if index == last:
                    raise
                self._absorb(index, errors, exc)
                continue
            if index == 0:
                return response
            extra = self._extra(index, errors)
            chat_response = response.chat_response
            return response.mutate(
                chat_response=chat_response.with_metadata(**extra) if chat_response else None,
                # The model object is no answer data; keep it out of logs and traces.
                context={**extra, CHAT_MODEL_OVERRIDE: request.context.get(CHAT_MODEL_OVERRIDE)},
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        errors: list[str] = []
        last = len(self._models)
        for index in range(last + 1):
            held: list[ChatClientResponse] = []
            started = False
            context: Any = request.context
            try:
                async with closing_stream(chain.next_stream(self._attempt(request, index))) as s:
                    async for chunk in s:
                        context = chunk.context
                        if not started and not _has_content(chunk):
                            held.append(chunk)
                            continue
                        if not started:
                            started = True
                            for early in held:
                                yield early
                        yield chunk
            except self._retry_on as exc:
                if started or index == last:
                    raise
                self._absorb(index, errors, exc)
                continue
            for early in held if not started else ():
                yield early
            if index > 0:
                restored = {
                    **context,
                    CHAT_MODEL_OVERRIDE: request.context.get(CHAT_MODEL_OVERRIDE),
                }
                yield metadata_chunk(restored, self._extra(index, errors))
            return
