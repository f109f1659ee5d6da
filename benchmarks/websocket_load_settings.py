"""Settings of the server ``websocket_load.py`` starts: the example site, tuned for measuring.

``DEBUG`` is off (Django would otherwise keep every query in memory), the coalescing interval
comes from ``BENCH_COALESCE_MS`` (0: one frame per token, the peer), and the Redis layer (when
``REDIS_URL`` is set) uses the prefix in ``BENCH_REDIS_PREFIX``, so runs never share keys.
"""

from __future__ import annotations

import os

from advisorsite.settings import *  # noqa: F403
from advisorsite.settings import CHANNEL_LAYERS, REDIS_URL

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ADVISORS = {"STREAM_COALESCE_MS": int(os.environ.get("BENCH_COALESCE_MS", "40"))}
if REDIS_URL:
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = os.environ.get("BENCH_REDIS_PREFIX", "bench")
