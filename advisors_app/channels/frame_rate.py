"""How many frames a chat socket may send: a token bucket per connection (issue 36).

Daphne queues every frame a client sends for the application, and Twisted every answer the
client does not read: a client sending faster than the consumer answers — invalid frames,
``cancel`` or ``busy`` messages, anything — grows the server's memory without bound. A bucket
of ``ADVISORS["WEBSOCKET_FRAME_BURST"]`` frames, refilled at
``ADVISORS["WEBSOCKET_FRAME_RATE"]`` per second, is far above what a person's chat page sends
(a message, a vote, a resume after a reconnect); a connection that empties it is closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["FrameBudget", "clock"]

#: The budget's clock; tests set their own to stay off the wall clock.
clock: Callable[[], float] = time.monotonic


class FrameBudget:
    """``burst`` frames at once, then ``rate`` more per second; ``rate == 0``: no bound."""

    __slots__ = ("_at", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = float(burst)
        self._at = clock()

    def take(self) -> bool:
        """Count one frame: whether the budget still had room for it."""
        if self.rate <= 0:
            return True
        now = clock()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True
