"""Secret values out of error messages, log lines, call logs and traces (issue 18).

:func:`redact` replaces, in a text, every configured secret value and every token shaped like a
credential with :data:`MARKER`; :func:`redact_data` does it in every string of nested JSON-like
data (a call log's trace). What counts as a secret:

- the value of every environment variable a model configuration names for its API key
  (``api_key_env``, and ``OPENAI_API_KEY``, the default of OpenAI itself): the aliases of
  ``ADVISORS["CHAT_MODELS"]``/``["EMBEDDING_MODELS"]``, the model-config rows, and the model
  configs kept in published chain-version snapshots;
- the values of credential headers (``Authorization``, ``X-Api-Key``, ...) in those configs
  (rows saved before :func:`secret_header_problems` refused them);
- the value of every environment variable whose name ends saying it holds a secret
  (``*_API_KEY``, ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD``, ...; values of at least
  12 characters);
- ``SECRET_KEY``, ``SECRET_KEY_FALLBACKS`` and ``EMAIL_HOST_PASSWORD``;
- ``Bearer …``/``Basic …`` credentials and ``sk-…`` keys, configured or not.

Values shorter than :data:`MIN_SECRET_LENGTH` characters are not redacted: they are not real
keys, and redacting them would garble ordinary text. Values are read at each call, so a rotated
key is redacted at once; the environment-variable *names* of model-config rows and snapshots are
read from the database at most every :data:`DATABASE_TTL` seconds, on a short-lived thread of
its own (never on the caller's connection or transaction, and allowed from async code), and at
once for rows this process saves and snapshots it builds (:func:`learn_snapshot`).

Cost: one precompiled regular expression per set of secret values; about 1 µs for a short
message, linear in the text's length. Chat models redact the same configured values from their
successful replies (:func:`secret_values`). :func:`install_log_redaction` (run by the app's
``ready()``) redacts every log record of the process as it is made, whichever logger makes it.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Iterable, Mapping
from typing import Any

from advisors_app.conf import cached_by_settings

__all__ = [
    "DATABASE_TTL",
    "MARKER",
    "MIN_SECRET_LENGTH",
    "connect",
    "install_log_redaction",
    "learn_snapshot",
    "redact",
    "redact_data",
    "secret_header_problems",
    "secret_values",
]

#: What a secret is replaced with.
MARKER = "[REDACTED]"

#: Configured values shorter than this (characters) are left alone.
MIN_SECRET_LENGTH = 8

#: Seconds between two reads of the environment-variable names the database's model configs use.
DATABASE_TTL = 60.0

# Variables found by their name alone must be longer: short ones are rarely real keys.
_NAMED_MIN_LENGTH = 12
_LOAD_TIMEOUT = 2.0

# The secret word must end the name: ``OPENAI_API_KEY`` holds a key, ``..._API_KEY_ENV`` a name.
_SECRET_ENV_NAME = re.compile(
    r"(?:(?:^|_)(?:API_?KEY|KEY|TOKEN|SECRET|CREDENTIALS?)|PASSWORD|PASSWD)$", re.IGNORECASE
)
_SECRET_HEADER = re.compile(
    r"authori[sz]ation|cookie|api[-_]?key|token|secret|passw|credential|signature|auth",
    re.IGNORECASE,
)
# ``Bearer``/``Basic`` followed by a token of 8+ characters holding a digit; ``sk-`` keys (also
# the masked ones providers echo, ``sk-abc***xyz``).
_TOKENS = (
    r"(?P<scheme>\b(?i:bearer|basic)[ \t]+)"
    r"(?=[A-Za-z0-9._~+/=-]{8})[A-Za-z0-9._~+/-]*[0-9][A-Za-z0-9._~+/-]*=*"
    r"|(?<![A-Za-z0-9])sk-[A-Za-z0-9_*-]{16,}"
)
# No secret nor token is shorter than this: shorter texts are returned as they are.
_SHORTEST = min(MIN_SECRET_LENGTH, 15)


def _replace(match: re.Match[str]) -> str:
    scheme = match.group("scheme")
    return scheme + MARKER if scheme else MARKER


class _Redactor:
    """One compiled pattern for one set of secret values."""

    __slots__ = ("_sub",)

    def __init__(self, values: Iterable[str]) -> None:
        # Longest first, so a value containing another is replaced whole.
        literals = "|".join(re.escape(v) for v in sorted(values, key=lambda v: (-len(v), v)))
        source = f"{literals}|{_TOKENS}" if literals else _TOKENS
        self._sub = re.compile(source).sub

    def text(self, text: str) -> str:
        if len(text) < _SHORTEST:
            return text
        return self._sub(_replace, text)

    def data(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {
                (self.text(k) if isinstance(k, str) else k): self.data(v) for k, v in value.items()
            }
        if isinstance(value, (list, tuple)):
            return type(value)(self.data(v) for v in value)
        return value


def redact(text: str) -> str:
    """``text`` with every secret value and credential-shaped token replaced by :data:`MARKER`.

    ``Bearer <token>`` keeps its scheme (``Bearer [REDACTED]``). Never raises for a string; may
    read the database's model-config names (see the module docstring) first.
    """
    return _current(load=True).text(text)


def redact_data(value: Any) -> Any:
    """A copy of JSON-like ``value`` (dicts, lists, tuples, scalars) with :func:`redact` applied
    to every string in it, dictionary keys included; other values are kept as they are."""
    return _current(load=True).data(value)


def secret_values() -> frozenset[str]:
    """The configured secret values :func:`redact` knows at this moment (no credential
    shapes), without reading the database: what the chat models redact from their replies
    (:mod:`advisors_app.core.providers.echoed_secrets`; a model call must not wait on a
    query). Installed as the core's source by the app's ``ready()``."""
    _current(load=False)
    return _last[0]


def secret_header_problems(headers: Any) -> list[str]:
    """Why a model config's ``settings.headers`` may not be stored: one message per header that
    is a credential by its name (``Authorization``, ``X-Api-Key``, ``Cookie``, anything with
    ``token``/``secret``/``auth``/...) or holds a secret-shaped or configured secret value.

    Secrets are only ever named by environment variable (``api_key_env``), never stored; the
    messages say so and never quote the value. ``[]`` when nothing is wrong (or ``headers`` is
    not a mapping: the provider registry reports that).
    """
    if not isinstance(headers, Mapping):
        return []
    problems = []
    for name, value in headers.items():
        if _SECRET_HEADER.search(str(name)):
            problems.append(
                f"headers[{str(name)!r}] would store a credential in the database. Keys are "
                "never stored: put the key in an environment variable and enter that variable's "
                "name as the API key variable (api_key_env); it is sent as "
                "'Authorization: Bearer <key>'."
            )
        elif isinstance(value, str) and redact(value) != value:
            problems.append(
                f"headers[{str(name)!r}] holds a secret value (a key or token). Keys are never "
                "stored: put it in an environment variable and enter that variable's name as "
                "the API key variable (api_key_env)."
            )
    return problems


# -- what is secret --------------------------------------------------------------------------


def _header_values(config: Mapping[str, Any]) -> set[str]:
    headers = config.get("headers")
    if not isinstance(headers, Mapping):
        return set()
    return {
        value
        for name, value in headers.items()
        if isinstance(value, str) and _SECRET_HEADER.search(str(name))
    }


def _collect(configs: Iterable[Any], names: set[str], values: set[str]) -> None:
    """Add the key variable names and credential header values of model ``configs``."""
    from advisors_app.core.providers.registry import api_key_env_of

    for config in configs:
        if not isinstance(config, Mapping):
            continue
        name = api_key_env_of(config)
        if name:
            names.add(name)
        values |= _header_values(config)


@cached_by_settings
def _settings_sources() -> tuple[frozenset[str], frozenset[str]]:
    """Key variable names (``OPENAI_API_KEY`` always) and credential header values of the
    settings' model aliases."""
    from advisors_app.definition.providers import chat_model_configs, embedding_model_configs

    names: set[str] = {"OPENAI_API_KEY"}
    values: set[str] = set()
    _collect([*chat_model_configs().values(), *embedding_model_configs().values()], names, values)
    return frozenset(names), frozenset(values)


def _django_secrets() -> set[str]:
    from django.conf import settings

    found = {getattr(settings, "SECRET_KEY", ""), getattr(settings, "EMAIL_HOST_PASSWORD", "")}
    found.update(getattr(settings, "SECRET_KEY_FALLBACKS", ()) or ())
    return {value for value in found if isinstance(value, str)}


_named_env: tuple[int, frozenset[str]] = (-1, frozenset())


def _secret_named_env() -> frozenset[str]:
    """Environment variables named like secrets (re-scanned when their number changes)."""
    global _named_env
    count, names = _named_env
    if count != len(os.environ):
        names = frozenset(n for n in list(os.environ) if _SECRET_ENV_NAME.search(n))
        _named_env = (len(os.environ), names)
    return names


# The database's names and header values, when they were read, and what this process saved.
_database: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())
_database_read_at = -math.inf
_database_lock = threading.Lock()
_saved_names: frozenset[str] = frozenset()
_saved_values: frozenset[str] = frozenset()


def _query_database() -> tuple[frozenset[str], frozenset[str]]:
    """Blocking: key variable names and credential header values of the model-config rows and
    of the model configs in chain-version snapshots."""
    from django.apps import apps
    from django.db import connections, router

    names: set[str] = set()
    values: set[str] = set()
    for model_name in ("ChatModelConfig", "EmbeddingModelConfig"):
        rows = apps.get_model("advisors_app", model_name).objects.all()
        _collect((row.to_config() for row in rows), names, values)
    version = apps.get_model("advisors_app", "ChainVersion")
    connection = connections[router.db_for_read(version)]
    if connection.vendor == "postgresql":
        table = connection.ops.quote_name(version._meta.db_table)
        # Only the model configs of the snapshots, not their templates and word lists.
        sql = (
            "SELECT DISTINCT ref.value FROM "
            f"{table} AS v, jsonb_each(CASE WHEN jsonb_typeof(v.snapshot -> 'references') = "
            "'object' THEN v.snapshot -> 'references' ELSE '{}'::jsonb END) AS ref "
            "WHERE ref.key LIKE 'chat_model:%%' OR ref.key LIKE 'embedding_model:%%'"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, [])
            configs = [json.loads(v) if isinstance(v, str) else v for (v,) in cursor.fetchall()]
        _collect(configs, names, values)
    else:
        for snapshot in version.objects.values_list("snapshot", flat=True).iterator():
            _collect(_snapshot_configs(snapshot), names, values)
    return frozenset(names), frozenset(values)


def _snapshot_configs(snapshot: Any) -> list[Any]:
    references = snapshot.get("references") if isinstance(snapshot, Mapping) else None
    if not isinstance(references, Mapping):
        return []
    return [
        config
        for key, config in references.items()
        if str(key).startswith(("chat_model:", "embedding_model:"))
    ]


def _read_database() -> None:
    """Refresh :data:`_database` when it is older than :data:`DATABASE_TTL` (one caller reads,
    the others go on with what is known). The query runs on a thread of its own: Django
    refuses queries on an event loop's thread, and a failing query must not break the caller's
    transaction."""
    global _database, _database_read_at
    if time.monotonic() - _database_read_at < DATABASE_TTL:
        return
    if not _database_lock.acquire(blocking=False):
        return
    try:
        if time.monotonic() - _database_read_at < DATABASE_TTL:
            return
        result: list[tuple[frozenset[str], frozenset[str]]] = []

        def read() -> None:
            from django.db import connections

            try:
                result.append(_query_database())
            except Exception:  # no database yet, no tables yet, database down: retry later
                pass
            finally:
                connections.close_all()

        reader = threading.Thread(target=read, name="advisors-redaction", daemon=True)
        reader.start()
        reader.join(_LOAD_TIMEOUT)
        if result:
            _database = result[0]
        _database_read_at = time.monotonic()
    finally:
        _database_lock.release()


def _remember(configs: Iterable[Any]) -> None:
    global _saved_names, _saved_values
    names: set[str] = set()
    values: set[str] = set()
    _collect(configs, names, values)
    if not names <= _saved_names or not values <= _saved_values:
        _saved_names = _saved_names | names
        _saved_values = _saved_values | values


def _model_config_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    _remember([instance.to_config()])


def _version_saved(sender: Any, instance: Any, **kwargs: Any) -> None:
    _remember(_snapshot_configs(instance.snapshot))


def learn_snapshot(snapshot: Mapping[str, Any]) -> None:
    """Learn the key variables of the model configs a chain snapshot uses, before this process
    builds it: a version published, or a model config saved, in another process would otherwise
    be redacted only after the next database read (up to :data:`DATABASE_TTL` seconds), and a
    provider error quoting its key in that window would pass unredacted."""
    _remember(_snapshot_configs(snapshot))


def connect() -> None:
    """Learn the key variables of model configs and versions this process saves at once
    (idempotent; ``AdvisorsAppConfig.ready()``)."""
    from django.apps import apps
    from django.db.models.signals import post_save

    for model_name in ("ChatModelConfig", "EmbeddingModelConfig"):
        post_save.connect(
            _model_config_saved,
            sender=apps.get_model("advisors_app", model_name),
            dispatch_uid=f"advisors_app.security.redaction.{model_name}",
        )
    post_save.connect(
        _version_saved,
        sender=apps.get_model("advisors_app", "ChainVersion"),
        dispatch_uid="advisors_app.security.redaction.ChainVersion",
    )


_last: tuple[frozenset[str], _Redactor] = (frozenset(), _Redactor(()))


def _current(*, load: bool) -> _Redactor:
    """The redactor for the secret values of this moment (rebuilt when they change)."""
    global _last
    from django.apps import apps

    names: set[str] = set(_saved_names)
    values: set[str] = set(_saved_values)
    if apps.ready:
        if load:
            _read_database()
        names |= _database[0]
        values |= _database[1]
        try:
            configured_names, header_values = _settings_sources()
        except Exception:  # a malformed ADVISORS setting: manage.py check reports it
            configured_names, header_values = frozenset({"OPENAI_API_KEY"}), frozenset()
        names |= configured_names
        values |= header_values
        values |= _django_secrets()
    environ = os.environ
    for name in names:
        value = environ.get(name)
        if value:
            values.add(value)
    for name in _secret_named_env():
        value = environ.get(name)
        if value and len(value) >= _NAMED_MIN_LENGTH:
            values.add(value)
    secrets = frozenset(v for v in values if len(v) >= MIN_SECRET_LENGTH)
    known, redactor = _last
    if secrets != known:
        redactor = _Redactor(secrets)
        _last = (secrets, redactor)
    return redactor


# -- logging ---------------------------------------------------------------------------------

_formatter = logging.Formatter()
_in_record = threading.local()
_install_lock = threading.Lock()
_installed = False


def _redact_record(record: logging.LogRecord) -> None:
    """Redact a record's message and traceback in place (unchanged records stay untouched, so
    handlers still group them by their format string)."""
    if getattr(_in_record, "active", False):
        return
    _in_record.active = True
    try:
        redactor = _current(load=False)
        message = record.getMessage()
        cleaned = redactor.text(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_info[0] is not None:
            text = record.exc_text or _formatter.formatException(record.exc_info)
            cleaned = redactor.text(text)
            if cleaned != text:
                # The exception object itself still says it: handlers that read exc_info
                # (error trackers) get the redacted text instead.
                record.exc_text, record.exc_info = cleaned, None
        if record.stack_info:
            record.stack_info = redactor.text(record.stack_info)
    except Exception:  # a record whose message cannot be formatted: logging reports that
        pass
    finally:
        _in_record.active = False


def install_log_redaction() -> None:
    """Make every log record of the process redacted as it is created, whichever logger and
    handler it goes to (wraps the current log-record factory; idempotent)."""
    global _installed
    with _install_lock:
        if _installed:
            return
        previous = logging.getLogRecordFactory()

        def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
            record = previous(*args, **kwargs)
            _redact_record(record)
            return record

        logging.setLogRecordFactory(factory)
        _installed = True
