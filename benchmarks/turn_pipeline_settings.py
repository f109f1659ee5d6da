"""Settings of the processes ``turn_pipeline.py`` starts, for our tree and the baseline's alike.

Imported as the top-level module ``turn_pipeline_settings`` (``benchmarks/`` goes on
``PYTHONPATH``), so one file configures both servers: ``advisorsite.settings`` comes from
whichever tree is first on ``sys.path`` (the server's working directory), with its own database
settings (pooled connections in ours, none in the baseline). ``DEBUG`` is off (Django would keep
every query, and our ``CallTrace`` would keep every payload), throttling is off (the REST row
sends far more than 30 turns a minute), delta coalescing keeps its default.
"""

from __future__ import annotations

import os

from advisorsite.settings import *  # noqa: F403
from advisorsite.settings import ADVISORS

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ADVISORS = {**ADVISORS, "CHAT_THROTTLE_RATE": ""}
# Creating the benchmark's users is not what is measured.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# The servers are plain HTTP on loopback: production's HTTPS redirect and secure-only cookies
# (advisorsite.settings with DJANGO_DEBUG off) would turn every request into a redirect.
SECURE_SSL_REDIRECT = False
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = False
SECURE_HSTS_SECONDS = 0

if os.environ.get("TURNBENCH_URLCONF"):
    # The Django floor of SSE time to first token (``_floors.py``): the site's middleware
    # in front of a view that only streams.
    ROOT_URLCONF = os.environ["TURNBENCH_URLCONF"]
