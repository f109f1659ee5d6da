"""``LastMaxTokenSizeContentPurger``: drop the oldest items until a token budget fits.

Spring AI's class of the same name (reference §3.18; unused by any advisor there, seed §6.11).
Divergence (seed §6.16.2 #10): when even the newest item alone exceeds the budget, Spring AI
returns an empty list, so a prompt is silently sent without its content; here the newest item
is always kept, and callers that must enforce the budget strictly check the result themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from ..tokens import TokenCountEstimator

__all__ = ["LastMaxTokenSizeContentPurger"]

T = TypeVar("T")


class LastMaxTokenSizeContentPurger:
    """Keeps the newest items of a list whose total size exceeds ``max_token_size`` (tokens).

    ``token_count_estimator`` estimates each item (a message, a document or a string).
    Raises ``ValueError`` for a missing estimator or a budget below 1.
    """

    def __init__(self, token_count_estimator: TokenCountEstimator, max_token_size: int) -> None:
        if token_count_estimator is None:
            raise ValueError("tokenCountEstimator cannot be null")
        if max_token_size < 1:
            raise ValueError("maxTokenSize must be greater than 0")
        self.token_count_estimator = token_count_estimator
        self.max_token_size = max_token_size

    def purge_excess(self, items: Sequence[T], total_size: int) -> list[T]:
        """Drop items from the front while ``total_size`` (tokens) exceeds the budget.

        ``total_size`` is the caller's count for ``items`` (it may include more, such as a
        system prompt); each dropped item's estimate is subtracted from it. The newest item is
        never dropped; an empty input gives ``[]``.
        """
        start = 0
        while start < len(items) - 1 and total_size > self.max_token_size:
            total_size -= self.token_count_estimator.estimate(items[start])
            start += 1
        return list(items[start:])
