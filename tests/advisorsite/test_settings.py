"""The example site's environment variables for a hosted or self-hosted chat model."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisors_app.models import Collection
from tests.core.providers.openai_server import Completion, ScriptedOpenAiServer
from tests.helpers import database_url_for_subprocess, subprocess_env

ROOT = Path(__file__).resolve().parents[2]


def advisors_setting(**env: str) -> dict:
    return site_setting("ADVISORS", **env)


def site_setting(name: str, **env: str) -> dict:
    script = f"import json; from django.conf import settings; print(json.dumps(settings.{name}))"
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=subprocess_env(
            DJANGO_SETTINGS_MODULE="advisorsite.settings",
            DATABASE_URL="postgresql://unused@localhost/unused",  # settings only
            **env,
        ),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_without_variables_the_embedded_model_is_the_default() -> None:
    assert advisors_setting(ADVISORS_CHAT_MODEL="") == {
        "CHAT_PAGE_DEFAULT_CHAIN": "python-docs",
        "MCP_ENDPOINT_ENABLED": True,
    }


def test_the_variables_name_an_openai_compatible_model() -> None:
    assert advisors_setting(ADVISORS_CHAT_MODEL="gpt-4o-mini") == {
        "CHAT_PAGE_DEFAULT_CHAIN": "python-docs",
        "MCP_ENDPOINT_ENABLED": True,
        "CHAT_MODELS": {"openai-compatible": {"provider": "openai", "model": "gpt-4o-mini"}},
        "DEFAULT_CHAT_MODEL": "openai-compatible",
    }
    local = advisors_setting(
        ADVISORS_CHAT_MODEL="llama3.1",
        ADVISORS_CHAT_BASE_URL="http://127.0.0.1:11434/v1",
        ADVISORS_CHAT_API_KEY_ENV="LOCAL_KEY",
    )
    assert local["CHAT_MODELS"]["openai-compatible"] == {
        "provider": "openai",
        "model": "llama3.1",
        "base_url": "http://127.0.0.1:11434/v1",
        "api_key_env": "LOCAL_KEY",
    }


@pytest.fixture
def server() -> Iterator[ScriptedOpenAiServer]:
    server = ScriptedOpenAiServer()
    yield server
    server.stop()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_demo_chain_runs_on_the_model_the_variables_name(
    demo: Collection, django_user_model, server: ScriptedOpenAiServer
) -> None:
    django_user_model.objects.create_superuser("admin", password="pw")
    server.add(Completion("A context manager wraps the block."))
    question = "How does the with statement work?"
    out = subprocess.run(
        [sys.executable, "manage.py", "chat", "python-docs", question, "--json"],
        cwd=ROOT,
        env=subprocess_env(
            DJANGO_SETTINGS_MODULE="advisorsite.settings",
            DATABASE_URL=database_url_for_subprocess(),
            ADVISORS_CHAT_MODEL="hosted-model",
            ADVISORS_CHAT_BASE_URL=server.base_url,
            ADVISORS_CHAT_API_KEY_ENV="HOSTED_KEY",
            HOSTED_KEY="secret-key",
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    done = json.loads(out.stdout.splitlines()[-1])
    assert done["content"] == "A context manager wraps the block."
    [request] = server.requests
    assert request.headers["authorization"] == "Bearer secret-key"
    assert request.body["model"] == "hosted-model" and request.body["stream"] is True
    sent = request.body["messages"][-1]["content"]
    assert sent.startswith(f"Question: {question}\n\nExcerpts from the Python Language Reference:")
    assert 'The "with" statement is used to wrap the execution of a block' in sent


@pytest.mark.django_db
def test_the_example_site_pools_its_database_connections() -> None:
    from django.conf import settings
    from django.db import connection

    assert settings.DATABASES["default"]["OPTIONS"]["pool"]["max_size"] >= 1
    assert settings.DATABASES["default"]["CONN_MAX_AGE"] == 0  # Django requires it with a pool
    connection.ensure_connection()
    assert connection.pool is not None


def test_with_redis_every_process_shares_one_cache() -> None:
    """The chat throttle lives in Django's cache: per process, several processes each allowed
    the whole rate (found by an acceptance pass)."""
    assert site_setting("CACHES", REDIS_URL="")["default"]["BACKEND"].endswith("LocMemCache")
    shared = site_setting("CACHES", REDIS_URL="redis://127.0.0.1:6379/3")["default"]
    assert shared["BACKEND"] == "django.core.cache.backends.redis.RedisCache"
    assert shared["LOCATION"] == "redis://127.0.0.1:6379/3"
