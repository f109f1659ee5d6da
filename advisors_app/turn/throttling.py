"""Per-user throttling of chat turns, counted by the turn for every transport.

The turn counts itself (:func:`chat_turn_wait`, a hook of its ``open`` stage:
:mod:`advisors_app.turn.stages`) only once its input passed validation, so refused requests never
use up the user's rate — but for a refused resume of paused tool calls, which counts
(:func:`advisors_app.approvals.pauses.open_resume`): retrying one is how a race against the
approvals worker is tried (issue 36). Over the rate, the turn is refused with
``TurnError("throttled")`` (:func:`count_chat_turn`) — 429 with ``Retry-After`` over REST and SSE,
an ``error`` frame with ``retry_after`` on the websocket. :class:`ChatRateThrottle` is DRF's
``UserRateThrottle`` with the scope ``"advisors_chat"`` and its rate read from
``ADVISORS["CHAT_THROTTLE_RATE"]`` (``"30/minute"`` by default; DRF's ``"<n>/<s|m|h|d>"`` form;
``""`` turns throttling off) at each turn, so ``override_settings`` applies at once.

The history lives in Django's default cache: per process with the default local-memory cache,
shared by all workers with a shared cache (Redis, Memcached).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from rest_framework.throttling import UserRateThrottle

from advisors_app.conf import app_settings
from advisors_app.exceptions import TurnError

__all__ = ["CHAT_THROTTLE_SCOPE", "ChatRateThrottle", "chat_turn_wait", "count_chat_turn"]

CHAT_THROTTLE_SCOPE = "advisors_chat"


class ChatRateThrottle(UserRateThrottle):
    """At most ``ADVISORS["CHAT_THROTTLE_RATE"]`` chat turns per user (see module docstring)."""

    scope = CHAT_THROTTLE_SCOPE

    def get_rate(self) -> str | None:
        return app_settings.CHAT_THROTTLE_RATE or None


def chat_turn_wait(user: Any) -> float | None:
    """Count one chat turn of ``user``; ``None`` if allowed, else seconds to wait.

    Synchronous (it uses the cache): the turn calls it in the thread hop it already makes to
    open the conversation.
    """
    throttle = ChatRateThrottle()
    if throttle.allow_request(SimpleNamespace(user=user, META={}), None):
        return None
    return throttle.wait()


def count_chat_turn(user: Any) -> None:
    """Count one chat turn of ``user`` (:func:`chat_turn_wait`); over the rate, raise
    ``TurnError("throttled")`` (429, ``retry_after``). Synchronous, as that is."""
    wait = chat_turn_wait(user)
    if wait is not None:
        raise TurnError(
            "throttled",
            f"Too many messages: try again in {math.ceil(wait)} s.",
            http_status=429,
            retry_after=wait,
        )
