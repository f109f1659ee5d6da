"""Which environment variables a model configuration may name as its API key (issue 36).

A model config names the variable holding its key (``api_key_env``) and the server sends that
variable's value as ``Authorization: Bearer …`` to the config's ``base_url``. Staff who may edit
model configs choose both, so without a limit they could name ``DJANGO_SECRET_KEY`` or
``DATABASE_URL`` and point ``base_url`` at a host they control: the request itself would carry
the secret (redaction only cleans what comes back). So a name must clearly be a provider key:

* by default, a name matching :data:`KEY_NAME` (``…_API_KEY``, ``…_KEY``, ``…_TOKEN``) and not
  denied by :func:`denied_reason` (what Django, the database, caches and clouds keep as their
  own secrets);
* when the process declares an allowlist (the Django layer's ``ADVISORS["PROVIDER_KEY_ENVS"]``,
  through :func:`set_allowed_key_envs`), exactly the names on it — and nothing else, not even a
  name the default rule would accept.

The check sits in :func:`~advisors_app.core.providers.registry.validate_model_config`, which
every path from a config to a model goes through (admin forms, system checks, and building a
model at run time), so a row stored before this rule existed is refused before any request.
Code that constructs a provider model directly (``OpenAICompatibleChatModel(api_key_env=…)``)
is trusted project code and is not limited.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection

__all__ = ["KEY_NAME", "denied_reason", "key_env_problem", "set_allowed_key_envs"]

#: What a provider key's variable is called by default.
KEY_NAME = re.compile(r"^[A-Z][A-Z0-9_]*_(API_KEY|KEY|TOKEN)$")

#: Names Django or the example site read as their own secrets, though they look like keys.
_DENIED_NAMES = frozenset(
    {"SECRET_KEY", "SECRET_KEY_FALLBACKS", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"}
)
#: Prefixes of the variables of Django (``DJANGO_SECRET_KEY``), the database, caches and clouds.
_DENIED_PREFIXES = ("DJANGO_", "DATABASE", "DB_", "POSTGRES", "REDIS", "AWS_")
#: Words that mark a variable as some other secret than a provider's key.
_DENIED_WORDS = ("SECRET", "PASSWORD", "PRIVATE", "SIGNING", "SESSION")

_allowed: Callable[[], Collection[str] | None] = lambda: None  # noqa: E731 - replaced at start-up


def set_allowed_key_envs(source: Callable[[], Collection[str] | None]) -> None:
    """Declare where the allowlist comes from: ``source()`` returns the names, or ``None`` for
    the default rule. Called at each check, so a changed setting applies at once."""
    global _allowed
    _allowed = source


def denied_reason(name: str) -> str | None:
    """Why the default rule refuses ``name``, or ``None`` when it accepts it."""
    if not KEY_NAME.match(name):
        return "its name does not end in _API_KEY, _KEY or _TOKEN"
    if name in _DENIED_NAMES or name.startswith(_DENIED_PREFIXES):
        return "it is one of the server's own secrets (Django, database, cache or cloud)"
    if any(word in name for word in _DENIED_WORDS):
        return "its name marks it as another kind of secret"
    return None


def key_env_problem(name: str) -> str | None:
    """Why a model config may not read its key from ``name`` (a sentence), or ``None``.

    Names only the variable, never its value.
    """
    allowed = _allowed()
    if allowed is not None:
        if name in allowed:
            return None
        return (
            f"the API key variable {name!r} is not listed in ADVISORS['PROVIDER_KEY_ENVS'] "
            "(when that setting is given, only its names may be read)"
        )
    reason = denied_reason(name)
    if reason is None:
        return None
    return (
        f"the API key variable {name!r} may not be read: {reason}. Name a provider key "
        "variable such as MY_PROVIDER_API_KEY, or list the name in "
        "ADVISORS['PROVIDER_KEY_ENVS']"
    )
