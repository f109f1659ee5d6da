"""Settings for the test suite: the example site plus a test-only app, on its own database.

With no ``DATABASE_URL`` the suite starts a throwaway embedded PostgreSQL (deleted at exit), so
it never touches the demo's ``var/pgdata``. A ``DATABASE_URL`` wins: subprocesses started by
tests get the test database that way (``tests.helpers.database_url_for_subprocess``).
"""

from __future__ import annotations

import os

os.environ.setdefault("ADVISORS_EMBEDDED_DB", "throwaway")
# Keeps the suite (and the subprocesses it starts) from writing var/secret_key.
os.environ.setdefault("DJANGO_SECRET_KEY", "insecure-key-for-tests-only")

from advisorsite.settings import *  # noqa: F403
from advisorsite.settings import CHANNEL_LAYERS, INSTALLED_APPS, REDIS_URL

# django.contrib.postgres registers OpClass for index expressions (the halfvec index of
# tests.testapp.WideItem, bug case B24).
INSTALLED_APPS = [
    *INSTALLED_APPS,
    "django.contrib.postgres",
    "tests.testapp",
    "tests.advisor_plugin",
]

# Hashing cost is not under test; this keeps user creation fast.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Each test process counts throttles on its own, whatever REDIS_URL says.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Tests that share the machine's Redis (channel layer) keep their keys apart with a prefix.
if REDIS_URL:
    CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = os.environ.get(
        "ADVISORS_TEST_REDIS_PREFIX", "asgi"
    )
