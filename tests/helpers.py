"""Helpers shared by tests that start subprocesses."""

from __future__ import annotations

import os
from urllib.parse import quote

from django.db import connection


def database_url_for_subprocess(name: str | None = None) -> str:
    """A ``DATABASE_URL`` for the server the tests use; database ``name`` or the test database.

    Give it to a subprocess (with ``DJANGO_SETTINGS_MODULE``) so it uses the same database as
    the test instead of starting its own. Request the ``django_db_setup`` fixture first (or mark
    the test ``django_db(transaction=True)`` so rows it writes are visible to the subprocess):
    until then the name is not yet the test database's.
    """
    settings = connection.settings_dict
    user = quote(settings["USER"] or "", safe="")
    password = f":{quote(settings['PASSWORD'], safe='')}" if settings["PASSWORD"] else ""
    host = quote(settings["HOST"] or "", safe="")  # a socket directory is a path
    port = f":{settings['PORT']}" if settings["PORT"] else ""
    return f"postgresql://{user}{password}@{host}{port}/{quote(name or settings['NAME'], safe='')}"


def subprocess_env(**overrides: str) -> dict[str, str]:
    """This process's environment without what would make a subprocess inherit its setup."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE"}}
    env.update(overrides)
    return env


#: What a stored reply keeps of its turn's outcome besides its trace id
#: (``TurnOutcome.reply_metadata``).
OUTCOME_KEYS = frozenset(
    {"version", "timings", "sources", "tools", "usage", "finish_reason", "finish_category"}
)


def without_outcome(metadata: dict) -> dict:
    """A stored message's metadata without what the turn's outcome added (tests of the
    transcript's shape compare the rest; an interrupted reply's ``finish_reason`` stays)."""
    kept = {"finish_reason"} if metadata.get("interrupted") else set()
    return {k: v for k, v in metadata.items() if k not in OUTCOME_KEYS - kept}
