"""System checks (E001–E014, W005, W010, W015–W017), each against real connections or
settings."""

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
    check_tasks,
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
    ("advisors", "check_id", "fragment"),
    [
        (["not", "a", "dict"], "E003", "must be a dict, not list"),
        (
            {"EMBEDDING_DIMENSIONS": "384"},
            "E003",
            "['EMBEDDING_DIMENSIONS'] must be int, got '384'",
        ),
        ({"MAX_MESSAGE_CHARS": True}, "E003", "['MAX_MESSAGE_CHARS'] must be int, got True"),
        ({"SSE_KEEPALIVE_SECONDS": "15"}, "E003", "['SSE_KEEPALIVE_SECONDS'] must be float"),
        ({"EMBEDING_DIMENSIONS": 384}, "E006", "unknown key 'EMBEDING_DIMENSIONS'"),
        ({"MAX_MESSAGE_CHARS": -5}, "E007", "['MAX_MESSAGE_CHARS'] = -5: must be greater than 0."),
        ({"STREAM_COALESCE_MS": -1}, "E007", "['STREAM_COALESCE_MS'] = -1: must be 0 or more."),
        ({"TRACE_PAYLOAD_SAMPLE": 1.5}, "E007", "= 1.5: must be a share from 0 to 1."),
        ({"EMBEDDING_DIMENSIONS": 512}, "E007", "column is vector(384)"),
        ({"CHAT_THROTTLE_RATE": "thirty"}, "E008", "'thirty': not a rate"),
        ({"CHAT_THROTTLE_RATE": "30/fortnight"}, "E008", "'30/fortnight': not a rate"),
        ({"UPLOAD_THROTTLE_RATE": "ten"}, "E008", "['UPLOAD_THROTTLE_RATE'] = 'ten': not a"),
        ({"SEARCH_THROTTLE_RATE": "1/week"}, "E008", "['SEARCH_THROTTLE_RATE'] = '1/week'"),
        ({"FEEDBACK_THROTTLE_RATE": "lots"}, "E008", "['FEEDBACK_THROTTLE_RATE'] = 'lots'"),
        ({"RESUME_THROTTLE_RATE": "5/year"}, "E008", "['RESUME_THROTTLE_RATE'] = '5/year'"),
        ({"MAX_SOCKETS_PER_USER": -1}, "E007", "['MAX_SOCKETS_PER_USER'] = -1: must be 0 or"),
        ({"TENANT_RESOLVER": "no.such.func"}, "E012", "'no.such.func': does not import"),
        ({"TENANT_RESOLVER": "django.conf.settings"}, "E012", "is not callable."),
    ],
)
def test_each_advisors_setting_problem_has_its_id(
    advisors: object, check_id: str, fragment: str
) -> None:
    with override_settings(ADVISORS=advisors):
        errors = check_settings(None)
    assert ids(errors) == [f"advisors_app.{check_id}"]
    assert fragment in errors[0].msg


def test_the_hints_of_the_settings_checks_say_how_to_fix_each_problem() -> None:
    with override_settings(ADVISORS={"EMBEDING_DIMENSIONS": 384, "MAX_MESSAGE_CHARS": "8000"}):
        unknown, wrong_type = check_settings(None)
    assert (
        "EMBEDDING_DIMENSIONS=384" in unknown.hint and "EMBEDDING_DIMENSIONS=384" in wrong_type.hint
    )
    with override_settings(ADVISORS={"MAX_MESSAGE_CHARS": 0}):
        [out_of_range] = check_settings(None)
    assert out_of_range.hint == "Its default is 8000."
    with override_settings(ADVISORS={"CHAT_THROTTLE_RATE": "thirty"}):
        [rate] = check_settings(None)
    assert '"30/minute"' in rate.hint
    with override_settings(ADVISORS={"TENANT_RESOLVER": "no.such.func"}):
        [resolver] = check_settings(None)
    assert "dotted path of a function user -> tenant label" in resolver.hint


@pytest.mark.parametrize(
    ("bad", "fragment"),
    [
        ({"command": ""}, "['bad']['command'] must be a non-empty string"),
        ({"command": "x", "env": {"N": 1}}, "['bad']['env'] must map names to strings"),
        ("python", "['bad'] must be a dict"),
    ],
)
def test_e009_mcp_servers_never_shows_a_value(bad: object, fragment: str) -> None:
    """A malformed entry is named with its field; no value of any entry (``env`` may hold a
    key) reaches the check's output, which CI logs keep."""
    good = {"command": "python", "env": {"OPENAI_API_KEY": "sk-SUPERSECRET-VALUE"}}
    with override_settings(ADVISORS={"MCP_SERVERS": {"good": good, "bad": bad}}):
        errors = check_settings(None)
    assert ids(errors) == ["advisors_app.E009"]
    assert fragment in errors[0].msg
    assert "SUPERSECRET" not in errors[0].msg + (errors[0].hint or "")
    assert "python" not in errors[0].msg.replace("'bad'", "")
    assert '"command"' in errors[0].hint


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

    apps = [a for a in settings.INSTALLED_APPS if a != "rest_framework.authtoken"]
    with override_settings(INSTALLED_APPS=apps):
        [error] = check_project(None)
    assert error.id == "advisors_app.E004" and "'rest_framework.authtoken'" in error.msg


def test_e013_the_swagger_ui_sidecar_is_missing() -> None:
    from django.conf import settings

    apps = [a for a in settings.INSTALLED_APPS if a != "drf_spectacular_sidecar"]
    with override_settings(INSTALLED_APPS=apps):
        [error] = check_project(None)
    assert error.id == "advisors_app.E013" and "'drf_spectacular_sidecar'" in error.msg
    spectacular = {"SWAGGER_UI_DIST": "https://cdn.example/swagger-ui"}
    with override_settings(INSTALLED_APPS=apps, SPECTACULAR_SETTINGS=spectacular):
        assert check_project(None) == []  # the UI comes from elsewhere: no sidecar needed


def test_e014_the_schema_class_is_not_drf_spectaculars() -> None:
    from django.conf import settings

    rest_framework = {**settings.REST_FRAMEWORK}
    del rest_framework["DEFAULT_SCHEMA_CLASS"]  # DRF's own, which drf-spectacular cannot use
    with override_settings(REST_FRAMEWORK=rest_framework):
        [error] = check_project(None)
    assert error.id == "advisors_app.E014" and "DEFAULT_SCHEMA_CLASS" in error.msg


def test_w005_w015_w016_asgi_channel_layer_and_login_url_gaps() -> None:
    assert check_project(None) == []
    with override_settings(ASGI_APPLICATION=None):
        assert ids(check_project(None)) == ["advisors_app.W005"]
    with override_settings(CHANNEL_LAYERS={}):
        assert ids(check_project(None)) == ["advisors_app.W015"]
    with override_settings(LOGIN_URL="nowhere"):
        [warning] = check_project(None)
    assert warning.id == "advisors_app.W016" and "'nowhere'" in warning.msg


def test_silencing_one_id_silences_only_its_problem() -> None:
    gaps = {"ASGI_APPLICATION": None, "CHANNEL_LAYERS": {}, "LOGIN_URL": "nowhere"}
    with override_settings(SILENCED_SYSTEM_CHECKS=["advisors_app.W015"], **gaps):
        found = [m for m in run_checks() if m.id.startswith("advisors_app.")]
        shown = {m.id for m in found if not m.is_silenced()}
    assert {m.id for m in found} == {"advisors_app.W005", "advisors_app.W015", "advisors_app.W016"}
    assert shown == {"advisors_app.W005", "advisors_app.W016"}


def test_w017_tasks_would_run_inline_with_debug_off() -> None:
    immediate = {"default": {"BACKEND": "django_tasks.backends.immediate.ImmediateBackend"}}
    database = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]}}
    with override_settings(DEBUG=False, TASKS=database):
        assert check_tasks(None) == []
    with override_settings(DEBUG=False, TASKS=immediate):
        [warning] = check_tasks(None)
    assert warning.id == "advisors_app.W017" and "ImmediateBackend" in warning.msg
    assert "django_tasks_db.DatabaseBackend" in warning.hint
    with override_settings(DEBUG=False):
        from django.conf import settings

        del settings.TASKS  # the tasks API's default: the immediate backend
        [warning] = check_tasks(None)
    assert warning.id == "advisors_app.W017" and "no TASKS setting" in warning.msg
    with override_settings(DEBUG=True, TASKS=immediate):
        assert check_tasks(None) == []  # development: inline is what one wants
