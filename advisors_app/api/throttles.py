"""Per-user throttling of chat turns, shared by every transport.

:class:`ChatRateThrottle` is DRF's ``UserRateThrottle`` with the scope ``"advisors_chat"`` and
its rate read from ``ADVISORS["CHAT_THROTTLE_RATE"]`` (``"30/minute"`` by default; DRF's
``"<n>/<s|m|h|d>"`` form; ``""`` turns throttling off) at each request, so
``override_settings`` applies at once. A throttled request gets 429 with ``Retry-After``.

The history lives in Django's default cache: per process with the default local-memory cache,
shared by all workers with a shared cache (Redis, Memcached). The websocket consumer counts
turns against the same budget with :func:`chat_turn_wait`.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from rest_framework.throttling import UserRateThrottle

from advisors_app.conf import app_settings

__all__ = ["CHAT_THROTTLE_SCOPE", "ChatRateThrottle", "chat_turn_wait"]

CHAT_THROTTLE_SCOPE = "advisors_chat"


class ChatRateThrottle(UserRateThrottle):
    """At most ``ADVISORS["CHAT_THROTTLE_RATE"]`` chat turns per user (see module docstring)."""

    scope = CHAT_THROTTLE_SCOPE

    def get_rate(self) -> str | None:
        return app_settings.CHAT_THROTTLE_RATE or None


def chat_turn_wait(user: Any) -> float | None:
    """Count one chat turn of ``user``; ``None`` if allowed, else seconds to wait.

    For transports outside DRF (the websocket consumer); synchronous (it uses the cache), so
    call it through ``sync_to_async`` from async code.
    """
    throttle = ChatRateThrottle()
    if throttle.allow_request(SimpleNamespace(user=user, META={}), None):
        return None
    return throttle.wait()
