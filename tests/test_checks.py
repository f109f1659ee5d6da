"""System checks E001–E003, each against a real connection or real settings."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks
from django.core.management import call_command
from django.db import connection
from django.db.utils import ConnectionHandler
from django.test import override_settings

from advisors_app.checks import (
    check_model_configs,
    check_project,
    check_settings,
    database_errors,
)


def ids(messages: list) -> list[str]:
    return [message.id for message in messages]


@pytest.mark.django_db
def test_check_database_passes_on_postgresql_with_pgvector() -> None:
    call_command("check", "--database", "default", "--fail-level", "ERROR")
    assert not [m for m in run_checks(databases=["default"]) if m.id.startswith("advisors_app")]


def test_e001_database_is_not_postgresql() -> None:
    sqlite = ConnectionHandler(
        {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}}
    )
    errors = database_errors(sqlite["default"])
    assert ids(errors) == ["advisors_app.E001"]
    assert "'default' uses sqlite" in errors[0].msg
    assert "embedded_postgres.database_settings" in errors[0].hint


@pytest.mark.django_db
def test_e002_extension_is_not_available() -> None:
    errors = database_errors(connection, extension="no_such_extension")
    assert ids(errors) == ["advisors_app.E002"]
    assert "apt-get install postgresql-<version>-pgvector" in errors[0].hint


@pytest.mark.parametrize(
    ("advisors", "fragment"),
    [
        (["not", "a", "dict"], "must be a dict, not list"),
        ({"EMBEDING_DIMENSIONS": 384}, "unknown key 'EMBEDING_DIMENSIONS'"),
        ({"EMBEDDING_DIMENSIONS": "384"}, "['EMBEDDING_DIMENSIONS'] must be int, got '384'"),
        ({"MAX_MESSAGE_CHARS": True}, "['MAX_MESSAGE_CHARS'] must be int, got True"),
        ({"SSE_KEEPALIVE_SECONDS": "15"}, "['SSE_KEEPALIVE_SECONDS'] must be float, got '15'"),
        ({"MAX_MESSAGE_CHARS": -5}, "['MAX_MESSAGE_CHARS'] = -5: must be greater than 0."),
        ({"STREAM_COALESCE_MS": -1}, "['STREAM_COALESCE_MS'] = -1: must be 0 or more."),
        ({"TRACE_PAYLOAD_SAMPLE": 1.5}, "= 1.5: must be a share from 0 to 1."),
        ({"EMBEDDING_DIMENSIONS": 512}, "column is vector(384)"),
        ({"CHAT_THROTTLE_RATE": "thirty"}, "'thirty': not a rate"),
        ({"CHAT_THROTTLE_RATE": "30/fortnight"}, "'30/fortnight': not a rate"),
        ({"TENANT_RESOLVER": "no.such.func"}, "'no.such.func': does not import"),
        ({"TENANT_RESOLVER": "django.conf.settings"}, "is not callable."),
    ],
)
def test_e003_advisors_setting_is_invalid(advisors: object, fragment: str) -> None:
    with override_settings(ADVISORS=advisors):
        errors = check_settings(None)
    assert ids(errors) == ["advisors_app.E003"]
    assert fragment in errors[0].msg
    assert "EMBEDDING_DIMENSIONS=384" in errors[0].hint


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"command": ""}, "['bad']['command'] must be a non-empty string"),
        ({"command": "x", "env": {"N": 1}}, "['bad']['env'] must map names to strings"),
        ("python", "['bad'] must be a dict"),
    ],
)
def test_e003_mcp_servers_never_shows_a_value(bad: object, fragment: str) -> None:
    """A malformed entry is named with its field; no value of any entry (``env`` may hold a
    key) reaches the check's output, which CI logs keep."""
    good = {"command": "python", "env": {"OPENAI_API_KEY": "sk-SUPERSECRET-VALUE"}}
    with override_settings(ADVISORS={"MCP_SERVERS": {"good": good, "bad": bad}}):
        errors = check_settings(None)
    assert ids(errors) == ["advisors_app.E003"]
    assert fragment in errors[0].msg
    assert "SUPERSECRET" not in errors[0].msg + (errors[0].hint or "")
    assert "python" not in errors[0].msg.replace("'bad'", "")


@pytest.mark.parametrize("setting", ["MCP_SERVERS", "CHAT_MODELS", "EMBEDDING_MODELS"])
def test_e003_wrong_typed_mapping_setting_shows_its_type_only(setting: str) -> None:
    value = [{"env": {"API_KEY": "sk-SUPERSECRET-VALUE"}}]
    with override_settings(ADVISORS={setting: value}):
        errors = check_settings(None)
    assert ids(errors) == ["advisors_app.E003"]
    assert f"[{setting!r}] must be dict, got a list." in errors[0].msg
    assert "SUPERSECRET" not in errors[0].msg


def test_valid_advisors_setting_passes() -> None:
    valid = {
        "DEFAULT_CHAT_MODEL": "gpt",
        "CHAT_THROTTLE_RATE": "100/hour",
        "TENANT_RESOLVER": "tests.api.views.test_documents.tenant_of",
    }
    with override_settings(ADVISORS=valid):
        assert check_settings(None) == []
    with override_settings(ADVISORS={"SSE_KEEPALIVE_SECONDS": 30}):  # a whole number of seconds
        assert check_settings(None) == []


def test_e010_model_config_is_invalid() -> None:
    advisors = {"CHAT_MODELS": {"fast": {"provider": "openai", "model": "m", "api_key": "sk-x"}}}
    with override_settings(ADVISORS=advisors):
        errors = check_model_configs(None)
    assert ids(errors) == ["advisors_app.E010"]
    assert "settings.ADVISORS['CHAT_MODELS']['fast'] is invalid" in errors[0].msg
    assert "unknown key(s) api_key" in errors[0].msg
    assert "sk-x" not in errors[0].msg


def test_e011_default_alias_is_unknown() -> None:
    with override_settings(ADVISORS={"DEFAULT_EMBEDDING_MODEL": "bge"}):
        errors = check_model_configs(None)
    assert ids(errors) == ["advisors_app.E011"]
    assert "'bge'" in errors[0].msg and "all-minilm-l6-v2" in errors[0].hint


def test_w010_api_key_variable_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ADVISORS_CHECK_KEY", raising=False)
    advisors = {
        "CHAT_MODELS": {
            "hosted": {"provider": "openai", "model": "m", "api_key_env": "ADVISORS_CHECK_KEY"},
            "local": {"provider": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1"},
        },
        "DEFAULT_CHAT_MODEL": "hosted",
    }
    with override_settings(ADVISORS=advisors):
        warnings = check_model_configs(None)
        assert ids(warnings) == ["advisors_app.W010"]
        assert "ADVISORS_CHECK_KEY" in warnings[0].msg and "'hosted'" in warnings[0].msg
        assert "advisors_app.W010" in ids(run_checks())
        monkeypatch.setenv("ADVISORS_CHECK_KEY", "sk-set")
        assert check_model_configs(None) == []
        assert "advisors_app.W010" not in ids(run_checks())


def test_model_checks_pass_with_the_builtin_defaults() -> None:
    with override_settings(ADVISORS={}):
        assert check_model_configs(None) == []


def test_e004_an_app_the_api_needs_is_missing() -> None:
    from django.conf import settings

    missing = ("rest_framework.authtoken", "drf_spectacular_sidecar")
    apps = [a for a in settings.INSTALLED_APPS if a not in missing]
    with override_settings(INSTALLED_APPS=apps):
        errors = [m for m in check_project(None) if m.id == "advisors_app.E004"]
    assert "'rest_framework.authtoken'" in errors[0].msg
    assert "'drf_spectacular_sidecar'" in errors[1].msg and len(errors) == 2
    rest_framework = {**settings.REST_FRAMEWORK}
    del rest_framework["DEFAULT_SCHEMA_CLASS"]  # DRF's own, which drf-spectacular cannot use
    with override_settings(REST_FRAMEWORK=rest_framework):
        [error] = check_project(None)
    assert "DEFAULT_SCHEMA_CLASS" in error.msg and error.id == "advisors_app.E004"


def test_w005_asgi_channel_layer_and_login_url_gaps() -> None:
    assert check_project(None) == []
    with override_settings(ASGI_APPLICATION=None, CHANNEL_LAYERS={}, LOGIN_URL="nowhere"):
        warnings = check_project(None)
    assert ids(warnings) == ["advisors_app.W005"] * 3
    assert [w.msg.split(" ")[0] for w in warnings] == [
        "ASGI_APPLICATION",
        "CHANNEL_LAYERS",
        "LOGIN_URL",
    ]
