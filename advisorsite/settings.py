"""Settings of the example site that serves advisors_app.

Everything secret or deployment-specific comes from the environment:

- ``DATABASE_URL``: any database URL; unset means an embedded PostgreSQL (``embedded_db``).
- ``REDIS_URL``: enables the Redis channel layer (several processes/hosts); unset means in-memory.
- ``DJANGO_SECRET_KEY``: unset means a key generated once into ``var/secret_key`` (DEBUG only).
- ``DJANGO_DEBUG`` (default ``true``), ``DJANGO_ALLOWED_HOSTS`` (comma-separated).
- ``DJANGO_DEBUG=0`` is production (README "Deployment"): ``DJANGO_SECRET_KEY`` is then required,
  cookies are HTTPS-only, HTTP is redirected to HTTPS, HSTS is sent, and WhiteNoise serves the
  output of ``collectstatic`` (``DJANGO_STATIC_ROOT``, default ``var/static``). Behind a
  TLS-terminating proxy: ``DJANGO_SECURE_PROXY_SSL_HEADER`` (e.g. ``X-Forwarded-Proto``),
  ``DJANGO_CSRF_TRUSTED_ORIGINS`` (comma-separated), ``DJANGO_SECURE_SSL_REDIRECT``,
  ``DJANGO_SECURE_HSTS_SECONDS`` (default 3600), ``DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS`` and
  ``DJANGO_SECURE_HSTS_PRELOAD`` (default off).
- ``ADVISORS_CHAT_MODEL``: a model of an OpenAI-compatible API (hosted or self-hosted) for
  every chain without a model of its own, instead of the embedded SmolLM2;
  ``ADVISORS_CHAT_BASE_URL`` its endpoint (default: OpenAI's), ``ADVISORS_CHAT_API_KEY_ENV``
  the name of the variable holding its key (default: ``OPENAI_API_KEY`` for OpenAI, none for
  another base URL).
- Model API keys are read by the model configurations from the variables they name.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Any

from csp.constants import NONE, SELF, UNSAFE_INLINE
from django.core.exceptions import ImproperlyConfigured
from django.core.management.utils import get_random_secret_key

from advisors_app.security.secret_files import read_or_create_secret
from advisorsite.embedded_db import database_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"


def _flag(name: str, default: bool) -> bool:
    """An on/off environment variable (``1``/``true``/``yes``/``on`` is on); unset: ``default``."""
    value = os.environ.get(name, "").strip().lower()
    return default if not value else value in {"1", "true", "yes", "on"}


DEBUG = _flag("DJANGO_DEBUG", True)
# Django finds its security, clickjacking and CSRF middleware by dotted path; the site uses
# subclasses (advisorsite/middleware.py), which advisorsite.W001–W003 look for instead.
SILENCED_SYSTEM_CHECKS = ["security.W001", "security.W002", "security.W003"]
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY and not DEBUG:
    # A key made up on one machine would differ between servers and end every session when
    # var/ is lost: production gets its key from where its other secrets come from.
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off: a long random value, e.g. "
        "from `python -c 'from django.core.management.utils import get_random_secret_key as k; "
        "print(k())'`, the same on every server process."
    )
if not SECRET_KEY:
    SECRET_KEY = read_or_create_secret(VAR_DIR / "secret_key", get_random_secret_key)
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
# Other origins whose pages may POST and open the chat websocket (advisors_app.security.origins),
# e.g. a proxy's public https:// address when it does not send DJANGO_SECURE_PROXY_SSL_HEADER.
CSRF_TRUSTED_ORIGINS = [
    origin for origin in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if origin
]
if os.environ.get("DJANGO_SECURE_PROXY_SSL_HEADER"):
    # Only behind a proxy that always sets (or strips) this header: clients could claim HTTPS.
    _proxy_header = os.environ["DJANGO_SECURE_PROXY_SSL_HEADER"].upper().replace("-", "_")
    SECURE_PROXY_SSL_HEADER = (f"HTTP_{_proxy_header}", "https")
if not DEBUG:
    # Production is HTTPS only: cookies never travel over plain HTTP, HTTP is redirected (unless
    # the proxy does it), and browsers are told (HSTS) to use HTTPS for the next hour by default.
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = _flag("DJANGO_SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_SECURE_HSTS_SECONDS", "3600"))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = _flag("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
    SECURE_HSTS_PRELOAD = _flag("DJANGO_SECURE_HSTS_PRELOAD", False)
    # HSTS for every subdomain, and the browsers' preload list, bind the whole domain, not just
    # this site: off unless asked for, and `check --deploy` is told that was decided.
    SILENCED_SYSTEM_CHECKS += [
        *([] if SECURE_HSTS_INCLUDE_SUBDOMAINS else ["security.W005"]),
        *([] if SECURE_HSTS_PRELOAD else ["security.W021"]),
    ]

INSTALLED_APPS = [
    "daphne",  # first: its runserver serves ASGI, websockets included
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",  # login lockout after repeated failures (AXES_* below)
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI assets served locally, never from a CDN
    "django_jsonform",  # the chain editor's params forms (its editor's static files)
    "django_tasks",  # Django's tasks API (django.tasks from Django 6.0)
    "django_tasks_db",  # its database backend and `manage.py db_worker`
    "advisors_app",
    "advisors_app.demo",  # the demo: load_demo, retrieval_check and the demo tools
    "advisorsite",  # the site's own checks (advisorsite/apps.py)
]

# Django's own middleware, as subclasses that do their (I/O-free) work on the event loop
# instead of hopping to a thread twice each per request (advisorsite/middleware.py).
MIDDLEWARE = [
    "advisorsite.middleware.SecurityMiddleware",
    "advisorsite.middleware.CSPMiddleware",  # Content-Security-Policy (CONTENT_SECURITY_POLICY)
    "advisorsite.middleware.SessionMiddleware",
    "advisorsite.middleware.CommonMiddleware",
    "advisorsite.middleware.CsrfViewMiddleware",
    "advisorsite.middleware.AuthenticationMiddleware",
    "advisorsite.middleware.MessageMiddleware",
    "advisorsite.middleware.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",  # last: turns a locked-out login into the lockout page
]
if not DEBUG:
    # Static files from collectstatic's output, served by the ASGI processes themselves.
    MIDDLEWARE.insert(1, "advisorsite.static_files.AsyncWhiteNoiseMiddleware")

# Content-Security-Policy on every page (django-csp; Django 6 has it built in). Scripts run only
# from this origin's files — no inline script, no event-handler attribute, no eval — so markup
# that slipped past escaping cannot run code. Styles may be inline: Django 5.2's admin, its
# change list, django-jsonform and Swagger UI write <style> blocks and style attributes, and a
# style can fetch nothing from elsewhere (images and fonts are this origin's, data: images at
# most). connect-src 'self' covers the chat page's fetches and its websocket (ws:/wss: of this
# host: CSP 3's 'self' matches them). Nothing may frame a page (X-Frame-Options says the same).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [SELF],
        "script-src": [SELF],
        "style-src": [SELF, UNSAFE_INLINE],
        "img-src": [SELF, "data:"],
        "font-src": [SELF],
        "connect-src": [SELF],
        "object-src": [NONE],
        "base-uri": [NONE],
        "form-action": [SELF],
        "frame-ancestors": [NONE],
    }
}

ROOT_URLCONF = "advisorsite.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

ASGI_APPLICATION = "advisorsite.asgi.application"

DATABASES = {"default": database_config()}
# Pooled connections (psycopg-pool): a turn's database work no longer pays for a new
# PostgreSQL connection on each request or thread. Django requires CONN_MAX_AGE = 0 with it.
DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
    "min_size": 1,
    "max_size": int(os.environ.get("DJANGO_DB_POOL_SIZE", "10")),
    "timeout": 10,
}
DATABASES["default"]["CONN_MAX_AGE"] = 0

REDIS_URL = os.environ.get("REDIS_URL")


def channel_layers(redis_url: str | None) -> dict[str, Any]:
    """``CHANNEL_LAYERS``: Redis when ``redis_url`` is set, otherwise in-memory (one process).

    channels_redis waits for a message with a 5 s ``BZPOPMIN`` while redis-py's default read
    timeout is also 5 s: when a busy event loop reads the empty reply late, the read times out,
    the receive raises and the consumer dies (socket closed with 1011, the rest of the answer
    lost: 2 of 500 chats in ``benchmarks/websocket_load.py``). A read timeout well above the
    wait keeps it from ever timing out; connecting still gives up after 5 s.

    redis-py's pool raises "Too many connections" past 100 (500 chats on two processes:
    ``group_send`` failed, consumers died in ``group_discard``): the layer's pool
    (:mod:`advisors_app.channels.redis_layer`, also the turn buffer's) holds up to 200 connections
    per process and makes a command wait up to 20 s for a free one. A socket's group messages
    wait in their process's inbox, which holds ``capacity`` messages for all its sockets:
    channels_redis reads it one message per four round trips, so at a peak (500 chats on two
    processes, 98 resumed on the other one) it held more than 1,000 and dropped the rest
    (1,900 frames lost); 10,000 absorbs the peak.
    """
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    host = {
        "address": redis_url,
        "socket_timeout": 30.0,
        "socket_connect_timeout": 5.0,
        "max_connections": 200,
        "timeout": 20.0,
    }
    return {
        "default": {
            "BACKEND": "advisors_app.channels.redis_layer.RedisChannelLayer",
            "CONFIG": {"hosts": [host], "capacity": 10000},
        }
    }


CHANNEL_LAYERS = channel_layers(REDIS_URL)

if REDIS_URL:
    # Several processes serve the site: what Django's cache counts (the chat throttle, DRF's
    # throttles) must be counted once for all of them, not once per process.
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "advisorsite",
        }
    }

# Background work (document ingestion) goes through Django's tasks API to `manage.py db_worker`
# processes: any number of them, on any machine, share the queue through PostgreSQL.
TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}

REST_FRAMEWORK = {
    # Token first: an anonymous request then gets 401 with "WWW-Authenticate: Token".
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "advisors_app API",
    "DESCRIPTION": "Run advisor chains, manage conversations and documents.",
    "VERSION": "1",
    # Request bodies without the read-only fields of the responses.
    "COMPONENT_SPLIT_REQUEST": True,
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# The demo's knowledge-base chain is what a new user should land on (the notes chain shows
# tool-call approval; it sorts first).
ADVISORS: dict[str, object] = {
    "CHAT_PAGE_DEFAULT_CHAIN": "python-docs",
    # Chains as MCP tools at /mcp/ (docs/mcp-server.md), for callers with an API token.
    "MCP_ENDPOINT_ENABLED": True,
}
CHAT_MODEL_ALIAS = "openai-compatible"
if os.environ.get("ADVISORS_CHAT_MODEL"):
    _chat_model: dict[str, object] = {
        "provider": "openai",
        "model": os.environ["ADVISORS_CHAT_MODEL"],
    }
    if os.environ.get("ADVISORS_CHAT_BASE_URL"):
        _chat_model["base_url"] = os.environ["ADVISORS_CHAT_BASE_URL"]
    if os.environ.get("ADVISORS_CHAT_API_KEY_ENV"):
        _chat_model["api_key_env"] = os.environ["ADVISORS_CHAT_API_KEY_ENV"]
    ADVISORS["CHAT_MODELS"] = {CHAT_MODEL_ALIAS: _chat_model}
    ADVISORS["DEFAULT_CHAT_MODEL"] = CHAT_MODEL_ALIAS

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Login throttling (django-axes), on the site's login page and the admin's: after
# AXES_FAILURE_LIMIT failed logins of one username from one IP address, that pair is refused
# (429, registration/lockout.html) for AXES_COOLOFF_TIME; a successful login resets the count.
# Attempts are rows in the database, so every server process counts them together. Behind a
# proxy, run daphne with --proxy-headers so the address is the client's, not the proxy's.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out pair before any check
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = 5
AXES_COOLOFF_TIME = timedelta(minutes=15)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/lockout.html"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT") or VAR_DIR / "static")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Production: collectstatic writes hashed, compressed copies that WhiteNoise serves with
    # far-future cache headers. DEBUG: the app directories' files as they are.
    "staticfiles": {
        "BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"
        if DEBUG
        else "whitenoise.storage.CompressedManifestStaticFilesStorage"
    },
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The site's own login page (any user; the admin's accepts staff only); the chat after it.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/chat/"
LOGOUT_REDIRECT_URL = "/"
