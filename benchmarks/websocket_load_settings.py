"""Settings of the servers ``websocket_load.py`` starts: the example site, tuned for measuring.

``DEBUG`` is off (Django would otherwise keep every query in memory); the Redis layer (when
``REDIS_URL`` is set) uses the prefix in ``BENCH_REDIS_PREFIX``, so runs never share keys and
both processes of a run share theirs (the turn buffer follows the layer's prefix); a dropped
socket's turn runs on (``BENCH_DISCONNECT_POLICY``, default ``continue``), so it can be resumed
on the other process; ``BENCH_COALESCE_MS`` sets the delta coalescing (default 40 ms). Every
load user sends one message: the per-user chat throttle is left as shipped.
"""

from __future__ import annotations

import os

from advisorsite.settings import *  # noqa: F403
from advisorsite.settings import CHANNEL_LAYERS, REDIS_URL

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ADVISORS = {
    "STREAM_COALESCE_MS": int(os.environ.get("BENCH_COALESCE_MS", "40")),
    "DISCONNECT_POLICY": os.environ.get("BENCH_DISCONNECT_POLICY", "continue"),
}
if REDIS_URL:
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = os.environ.get("BENCH_REDIS_PREFIX", "bench")
