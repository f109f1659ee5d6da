"""Per-user rates of the requests that are not turns: votes on replies and stream resumes.

Each is DRF's ``UserRateThrottle`` with a scope of its own and its rate read from an
``ADVISORS`` setting at each request (so ``override_settings`` applies at once; ``""`` turns it
off), shared by every transport that takes the request:

* :class:`FeedbackRateThrottle` — ``ADVISORS["FEEDBACK_THROTTLE_RATE"]``: ``PUT`` and ``DELETE
  /api/messages/<id>/feedback/`` (a DRF throttle class of the view) and the websocket's
  ``feedback`` frames. Every vote counts, stored or refused, as every search does: a refused
  one cost a database read all the same.
* :class:`ResumeRateThrottle` — ``ADVISORS["RESUME_THROTTLE_RATE"]``: the SSE resume
  (``{"conversation_id", "resume": true}`` on the stream endpoint) and the websocket's
  ``resume`` frames. Every well-formed resume counts, whether a turn was kept or not (a resume
  of nothing still reads the buffer); a malformed one is refused before it costs anything.

Over the rate: :func:`rate_refusal`, a 429 ``throttled`` refusal with ``retry_after`` (REST:
the ``Retry-After`` header; websocket: an ``error`` frame), as chat turns answer
(:mod:`advisors_app.turn.throttling`). Histories live in Django's default cache: per process
with the local-memory cache, shared by every process with Redis or Memcached.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

from rest_framework.throttling import UserRateThrottle

from advisors_app.conf import app_settings
from advisors_app.exceptions import Refusal

__all__ = [
    "FeedbackRateThrottle",
    "ResumeRateThrottle",
    "SettingRateThrottle",
    "count_request",
    "rate_refusal",
]


class SettingRateThrottle(UserRateThrottle):
    """``UserRateThrottle`` whose rate is ``ADVISORS[setting]``; ``what`` names the requests
    counted in the refusal's message ("votes", "resumes")."""

    setting = ""
    what = "requests"

    def get_rate(self) -> str | None:
        return str(getattr(app_settings, self.setting)) or None


class FeedbackRateThrottle(SettingRateThrottle):
    """At most ``ADVISORS["FEEDBACK_THROTTLE_RATE"]`` votes per user, on every transport."""

    scope = "advisors_feedback"
    setting = "FEEDBACK_THROTTLE_RATE"
    what = "votes"


class ResumeRateThrottle(SettingRateThrottle):
    """At most ``ADVISORS["RESUME_THROTTLE_RATE"]`` stream resumes per user, on every
    transport."""

    scope = "advisors_resume"
    setting = "RESUME_THROTTLE_RATE"
    what = "resumes"


def rate_refusal(throttle: type[SettingRateThrottle], wait: float | None) -> Refusal:
    """The 429 ``throttled`` refusal of a request over ``throttle``'s rate, ``wait`` seconds
    before the next one is allowed."""
    after = f" in {math.ceil(wait)} s" if wait else " later"
    return Refusal(
        f"Too many {throttle.what}: try again{after} "
        f"(ADVISORS[{throttle.setting!r}] = {getattr(app_settings, throttle.setting)!r}).",
        code="throttled",
        http_status=429,
        retry_after=wait,
    )


def count_request(throttle: type[SettingRateThrottle], user: Any) -> None:
    """Count one request of ``user`` against ``throttle``'s rate; over it, raise
    :func:`rate_refusal`. Synchronous (Django's cache): transports without DRF's pipeline
    (the websocket, the SSE resume) call it in a thread hop they make anyway."""
    counter = throttle()
    if not counter.allow_request(SimpleNamespace(user=user, META={}), None):
        raise rate_refusal(throttle, counter.wait())
