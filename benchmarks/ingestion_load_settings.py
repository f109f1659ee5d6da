"""Settings of the processes ``ingestion_load.py`` starts (the server and the worker).

The example site's settings with ``DEBUG`` off (Django would keep every query), the upload rate,
the quotas and the CPU limit off (the large upload must keep the worker busy for the whole
measurement), and fast password hashing for its one user.
"""

from __future__ import annotations

from advisorsite.settings import *  # noqa: F403
from advisorsite.settings import ADVISORS

DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1"]
ADVISORS = {
    **ADVISORS,
    "UPLOAD_THROTTLE_RATE": "",
    "UPLOAD_BYTES_PER_DAY": 0,
    "MAX_CHUNKS_PER_COLLECTION": 0,
    "INGESTION_CPU_SECONDS": 0,
}
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
# Plain HTTP on loopback: no redirect to HTTPS (production's default with DEBUG off).
SECURE_SSL_REDIRECT = False
