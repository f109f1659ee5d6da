"""``BudgetGuardAdvisor``: refuses prompts over a size budget without calling the model.

Recipe 1 of seed §6.15 ("预算守卫 advisor").
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from ..advisor import HIGHEST_PRECEDENCE, AdvisorRole, CallAdvisor, StreamAdvisor
from ..requests import ChatClientRequest, ChatClientResponse
from ..streams import closing_stream
from ..tokens import TiktokenTokenCountEstimator, TokenCountEstimator
from ._support import answer

__all__ = ["BUDGET_EXCEEDED", "DEFAULT_MESSAGE", "REJECTION_REASON", "BudgetGuardAdvisor"]

logger = logging.getLogger(__name__)

#: Context and metadata key: why the request was refused, e.g. ``"maxChars=8000"``.
REJECTION_REASON = "budget_guard_reason"
#: Finish reason of the refusal.
BUDGET_EXCEEDED = "BUDGET_EXCEEDED"
DEFAULT_MESSAGE = "The request is too long. Please shorten it and try again."


class BudgetGuardAdvisor(CallAdvisor, StreamAdvisor):
    """Answers ``message`` instead of calling the model when the prompt exceeds a budget.

    Budgets: ``max_chars`` (characters of every message's text, Spring's
    ``prompt.getContents().length()``; default 8000) and/or ``max_tokens`` (tokens of the
    prompt's messages, per-message overhead included, counted with ``token_count_estimator``,
    by default :class:`~advisors_app.core.tokens.TiktokenTokenCountEstimator`). ``None``
    disables a budget; a negative one raises ``ValueError``. The refusal has finish reason
    :data:`BUDGET_EXCEEDED` and puts :data:`REJECTION_REASON` (``"maxChars=8000"`` or
    ``"maxTokens=..."``) in its context and metadata for outer audit advisors.

    Default order ``HIGHEST_PRECEDENCE + 150``: outside the memory advisors, so an oversized
    request is refused before history is loaded; it then measures the request as the client
    sent it. Order it inside memory (> ``HIGHEST_PRECEDENCE + 200``) to budget the prompt with
    history.

    Divergences from the seed's recipe: a token budget, an English default message (the
    recipe's is "请求过长，请缩短后重试。"; pass ``message`` to change it), a finish reason,
    and the reason also in the response metadata.
    """

    __slots__ = ("_estimator", "_max_chars", "_max_tokens", "_message", "_order")

    DEFAULT_ORDER: ClassVar[int] = HIGHEST_PRECEDENCE + 150
    ROLES: ClassVar[frozenset[AdvisorRole]] = frozenset({AdvisorRole.GUARD})

    def __init__(
        self,
        max_chars: int | None = 8000,
        max_tokens: int | None = None,
        *,
        token_count_estimator: TokenCountEstimator | None = None,
        message: str = DEFAULT_MESSAGE,
        order: int = DEFAULT_ORDER,
    ) -> None:
        for label, value in (("max_chars", max_chars), ("max_tokens", max_tokens)):
            if value is not None and value < 0:
                raise ValueError(f"{label} must be >= 0 or None, got {value}")
        if message is None:
            raise ValueError("message must not be null")
        self._max_chars = max_chars
        self._max_tokens = max_tokens
        self._estimator = token_count_estimator or (
            TiktokenTokenCountEstimator() if max_tokens is not None else None
        )
        if self._estimator is not None:
            # Load the tokenizer now rather than on the event loop of the first request.
            self._estimator.estimate("budget")
        self._message = message
        self._order = order

    def rejection(self, request: ChatClientRequest) -> str | None:
        """Why ``request`` is over budget (``"maxChars=N"`` / ``"maxTokens=N"``), else ``None``."""
        prompt = request.prompt
        if self._max_chars is not None and len(prompt.contents) > self._max_chars:
            return f"maxChars={self._max_chars}"
        if (
            self._max_tokens is not None
            and self._estimator is not None
            and self._estimator.estimate(prompt.instructions) > self._max_tokens
        ):
            return f"maxTokens={self._max_tokens}"
        return None

    def _reject(self, request: ChatClientRequest, reason: str) -> ChatClientResponse:
        logger.info("%s refused a request: %s", self.name, reason)
        return answer(
            self._message,
            request.context,
            finish_reason=BUDGET_EXCEEDED,
            extra={REJECTION_REASON: reason},
        )

    async def advise_call(self, request: ChatClientRequest, chain: Any) -> ChatClientResponse:
        reason = self.rejection(request)
        if reason is not None:
            return self._reject(request, reason)
        response: ChatClientResponse = await chain.next_call(request)
        return response

    async def advise_stream(
        self, request: ChatClientRequest, chain: Any
    ) -> AsyncIterator[ChatClientResponse]:
        reason = self.rejection(request)
        if reason is not None:
            yield self._reject(request, reason)
            return
        async with closing_stream(chain.next_stream(request)) as chunks:
            async for chunk in chunks:
                yield chunk
