"""DRF throttles of the API endpoints that are not turns (turns and uploads are counted by the
turn and by :mod:`advisors_app.ingestion.uploads`, once their input is valid).

:class:`SearchRateThrottle` limits ``POST /api/documents/search/`` per user to
``ADVISORS["SEARCH_THROTTLE_RATE"]`` (read at each request, so ``override_settings`` applies at
once). It runs in DRF's request pipeline, before the body is read: every search counts, answered
or refused, since a refused one cost the server as much to turn away. Histories live in Django's
default cache: per process with the local-memory cache, shared with Redis or Memcached.
"""

from __future__ import annotations

import math

from rest_framework.throttling import UserRateThrottle

from advisors_app.conf import app_settings
from advisors_app.exceptions import Refusal

__all__ = ["SEARCH_THROTTLE_SCOPE", "SearchRateThrottle", "search_throttled"]

SEARCH_THROTTLE_SCOPE = "advisors_search"


class SearchRateThrottle(UserRateThrottle):
    """At most ``ADVISORS["SEARCH_THROTTLE_RATE"]`` searches per user (DRF's rate form)."""

    scope = SEARCH_THROTTLE_SCOPE

    def get_rate(self) -> str | None:
        return app_settings.SEARCH_THROTTLE_RATE or None


def search_throttled(wait: float | None) -> Refusal:
    """The 429 ``throttled`` refusal of a search over the rate, ``wait`` seconds before the
    next one is allowed."""
    after = f" in {math.ceil(wait)} s" if wait else " later"
    return Refusal(
        f"Too many searches: try again{after} "
        f"(ADVISORS['SEARCH_THROTTLE_RATE'] = {app_settings.SEARCH_THROTTLE_RATE!r}).",
        code="throttled",
        http_status=429,
        retry_after=wait,
    )
