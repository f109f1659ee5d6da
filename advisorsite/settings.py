"""Settings of the example site that serves advisors_app.

Everything secret or deployment-specific comes from the environment:

- ``DATABASE_URL``: any database URL; unset means an embedded PostgreSQL (``embedded_db``).
- ``REDIS_URL``: enables the Redis channel layer (several processes/hosts); unset means in-memory.
- ``DJANGO_SECRET_KEY``: unset means a key generated once into ``var/secret_key``.
- ``DJANGO_DEBUG`` (default ``true``), ``DJANGO_ALLOWED_HOSTS`` (comma-separated).
- ``ADVISORS_CHAT_MODEL``: a model of an OpenAI-compatible API (hosted or self-hosted) for
  every chain without a model of its own, instead of the embedded SmolLM2;
  ``ADVISORS_CHAT_BASE_URL`` its endpoint (default: OpenAI's), ``ADVISORS_CHAT_API_KEY_ENV``
  the name of the variable holding its key (default: ``OPENAI_API_KEY`` for OpenAI, none for
  another base URL).
- Model API keys are read by the model configurations from the variables they name.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.utils import get_random_secret_key

from advisors_app.secret_files import read_or_create_secret
from advisorsite.embedded_db import database_config

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = BASE_DIR / "var"

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or read_or_create_secret(
    VAR_DIR / "secret_key", get_random_secret_key
)
DEBUG = os.environ.get("DJANGO_DEBUG", "true").lower() in {"1", "true", "yes", "on"}
ALLOWED_HOSTS = os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")

INSTALLED_APPS = [
    "daphne",  # first: its runserver serves ASGI, websockets included
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI assets served locally, never from a CDN
    "django_tasks",  # Django's tasks API (django.tasks from Django 6.0)
    "django_tasks_db",  # its database backend and `manage.py db_worker`
    "advisors_app",
    "advisors_app.demo",  # the demo: load_demo, retrieval_check and the demo tools
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
    """
    if not redis_url:
        return {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    host = {"address": redis_url, "socket_timeout": 30.0, "socket_connect_timeout": 5.0}
    return {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [host]},
        }
    }


CHANNEL_LAYERS = channel_layers(REDIS_URL)

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

ADVISORS: dict[str, object] = {}
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

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The site's own login page (any user; the admin's accepts staff only); the chat after it.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "/chat/"
LOGOUT_REDIRECT_URL = "/"
