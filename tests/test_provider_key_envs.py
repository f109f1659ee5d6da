"""Issue 36: a model config may only send a provider key, never one of the server's secrets.

Staff who may edit model configs choose both ``api_key_env`` and ``base_url``; the server sends
that variable's value as a bearer token to that URL. So only provider-key names are read (or,
with ``ADVISORS["PROVIDER_KEY_ENVS"]``, only the names listed), checked in the admin form, by
the system checks and again when a model is built at run time — a row stored before the rule
sends nothing. A loopback server stands for the attacker's host.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission
from django.core.exceptions import ValidationError
from django.test import Client, override_settings

from advisors_app.checks import check_model_configs, check_settings
from advisors_app.core.providers.key_envs import denied_reason
from advisors_app.core.providers.registry import create_chat_model, validate_model_config
from advisors_app.definition.runtime import clear_cache
from advisors_app.models import ChainVersion, ChatModelConfig, EmbeddingModelConfig
from tests.core.providers.openai_server import ScriptedOpenAiServer
from tests.factories import make_chain
from tests.test_consumers import frames_until_end, open_socket

SECRET = "django-secret-value-0123456789abcdef"


def openai(name: str | None, **more: Any) -> dict[str, Any]:
    config: dict[str, Any] = {"provider": "openai", "model": "m", **more}
    if name is not None:
        config["api_key_env"] = name
    return config


# -- the rule ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["OPENAI_API_KEY", "GROQ_API_KEY", "MY_PROVIDER_TOKEN", "LOCAL_KEY", "ADVISORS_TEST_KEY"],
)
def test_provider_key_names_are_accepted(name: str) -> None:
    assert denied_reason(name) is None
    validate_model_config(openai(name, base_url="http://127.0.0.1:9/v1"), "chat")


@pytest.mark.parametrize(
    "name",
    [
        "DJANGO_SECRET_KEY",
        "SECRET_KEY",
        "PATH",
        "DATABASE_URL",
        "DATABASE_API_KEY",
        "REDIS_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "JWT_SECRET_KEY",
        "EMAIL_HOST_PASSWORD",
        "openai_api_key",
    ],
)
def test_other_variables_are_refused_by_name_only(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(name, SECRET)
    with pytest.raises(ValueError, match=f"'api_key_env'.*{name}") as refused:
        validate_model_config(openai(name, base_url="http://127.0.0.1:9/v1"), "chat", "evil")
    assert SECRET not in str(refused.value)
    with pytest.raises(ValueError):
        validate_model_config(openai(name), "embedding")


def test_the_allowlist_is_the_only_source_when_set() -> None:
    with override_settings(ADVISORS={"PROVIDER_KEY_ENVS": ["LLM_ACCESS"]}):
        validate_model_config(openai("LLM_ACCESS"), "chat")
        with pytest.raises(ValueError, match="PROVIDER_KEY_ENVS"):
            validate_model_config(openai("GROQ_API_KEY"), "chat")
        # OpenAI's implied default is a name like any other: it must be listed too.
        with pytest.raises(ValueError, match="OPENAI_API_KEY"):
            validate_model_config(openai(None), "chat")
        validate_model_config(openai(None, base_url="http://127.0.0.1:9/v1"), "chat")  # no key
    with override_settings(ADVISORS={"PROVIDER_KEY_ENVS": ["DJANGO_SECRET_KEY"]}):
        validate_model_config(openai("DJANGO_SECRET_KEY"), "chat")  # listed: the site's choice
    validate_model_config(openai(None), "chat")  # back to the default rule


# -- admin and model validation ---------------------------------------------------------------


@pytest.mark.django_db
@pytest.mark.parametrize("model", [ChatModelConfig, EmbeddingModelConfig])
def test_a_row_naming_a_secret_fails_validation_on_its_field(model: Any) -> None:
    row = model(slug="evil", provider="openai", model="m", api_key_env="DJANGO_SECRET_KEY")
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    assert "DJANGO_SECRET_KEY" in str(refused.value.message_dict["api_key_env"])


@pytest.mark.django_db
def test_the_admin_form_shows_the_error_and_stores_nothing(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET)
    form = {
        "slug": "evil",
        "name": "",
        "provider": "openai",
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "DJANGO_SECRET_KEY",
        "timeout": "60",
        "max_retries": "0",
        "options": "{}",
        "settings": "{}",
    }
    page = admin_client.post("/admin/advisors_app/chatmodelconfig/add/", form)
    assert page.status_code == 200
    html = page.content.decode()
    assert "may not be read" in html and SECRET not in html
    assert not ChatModelConfig.objects.exists()
    with override_settings(ADVISORS={"PROVIDER_KEY_ENVS": ["LLM_ACCESS"]}):
        page = admin_client.post(
            "/admin/advisors_app/chatmodelconfig/add/", {**form, "api_key_env": "LLM_ACCESS"}
        )
    assert page.status_code == 302
    assert ChatModelConfig.objects.get().api_key_env == "LLM_ACCESS"


@pytest.mark.django_db
def test_the_admin_list_flags_an_old_row_instead_of_saying_its_key_is_set(
    admin_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET)
    ChatModelConfig.objects.create(
        slug="old", provider="openai", model="m", api_key_env="DJANGO_SECRET_KEY"
    )
    html = admin_client.get("/admin/advisors_app/chatmodelconfig/").content.decode()
    assert "DJANGO_SECRET_KEY may not be read" in html
    assert "DJANGO_SECRET_KEY is set" not in html and SECRET not in html


# -- system checks ----------------------------------------------------------------------------


def test_a_settings_alias_naming_a_secret_is_e010(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET)
    aliases = {"evil": openai("DJANGO_SECRET_KEY", base_url="http://127.0.0.1:9/v1")}
    with override_settings(ADVISORS={"CHAT_MODELS": aliases, "EMBEDDING_MODELS": aliases}):
        errors = check_model_configs(None)
    assert [e.id for e in errors] == ["advisors_app.E010", "advisors_app.E010"]
    assert all("DJANGO_SECRET_KEY" in e.msg and SECRET not in e.msg for e in errors)
    with override_settings(ADVISORS={"CHAT_MODELS": aliases, "PROVIDER_KEY_ENVS": ["X_KEY"]}):
        assert [e.id for e in check_model_configs(None)] == ["advisors_app.E010"]


@pytest.mark.parametrize("value", ["OPENAI_API_KEY", [1], {"A_KEY": 1}])
def test_a_malformed_allowlist_is_e003(value: Any) -> None:
    with override_settings(ADVISORS={"PROVIDER_KEY_ENVS": value}):
        assert [e.id for e in check_settings(None)] == ["advisors_app.E003"]
    with override_settings(ADVISORS={"PROVIDER_KEY_ENVS": ["A_KEY"]}):
        assert check_settings(None) == []


# -- run time: a row stored before the rule ---------------------------------------------------


def test_building_a_model_refuses_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET)
    server = ScriptedOpenAiServer()
    try:
        with pytest.raises(ValueError, match="DJANGO_SECRET_KEY") as refused:
            create_chat_model(openai("DJANGO_SECRET_KEY", base_url=server.base_url))
        assert SECRET not in str(refused.value)
        assert server.requests == []
    finally:
        server.stop()


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedOpenAiServer]:
    monkeypatch.setenv("DJANGO_SECRET_KEY", SECRET)
    monkeypatch.setenv("LOOPBACK_TEST_API_KEY", "provider-key-0123456789")
    clear_cache()
    server = ScriptedOpenAiServer()
    yield server
    server.stop()
    clear_cache()


@pytest.fixture
def staff(server: ScriptedOpenAiServer, django_user_model: Any) -> Any:
    """Staff who may view chains (so run drafts), and a draft whose live model row was pointed
    at DJANGO_SECRET_KEY and the loopback host behind the form's back (an old row)."""
    model = ChatModelConfig.objects.create(
        slug="hosted",
        provider="openai",
        model="m",
        base_url=server.base_url,
        api_key_env="LOOPBACK_TEST_API_KEY",
        max_retries=0,
    )
    make_chain("leaky", model=model)
    ChatModelConfig.objects.filter(pk=model.pk).update(api_key_env="DJANGO_SECRET_KEY")
    user = django_user_model.objects.create_user("sam", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_advisorchain"))
    return user


def rest(user: Any, path: str) -> Any:
    client = Client()
    client.force_login(user)
    return client.post(
        f"/api/chains/leaky/{path}/",
        {"message": "hi", "version": "draft"},
        content_type="application/json",
    )


def assert_nothing_sent(server: ScriptedOpenAiServer, caplog: Any, *texts: str) -> None:
    assert server.requests == []
    for text in texts:
        assert SECRET not in text
    assert SECRET not in caplog.text


@pytest.mark.django_db(transaction=True)
def test_the_draft_call_and_stream_refuse_without_sending(
    staff: Any, server: ScriptedOpenAiServer, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    texts = []
    for path in ("call", "stream"):  # a stream is refused before it opens, as a call is
        answer = rest(staff, path)
        assert answer.status_code == 400, path
        error = answer.json()["error"]
        assert (
            error["code"] == "invalid"
            and "'DJANGO_SECRET_KEY' may not be read" in (error["message"])
        )
        texts.append(answer.content.decode())
    assert_nothing_sent(server, caplog, *texts)


@pytest.mark.django_db(transaction=True)
async def test_the_draft_on_the_websocket_refuses_without_sending(
    staff: Any, server: ScriptedOpenAiServer, caplog: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    socket = await open_socket(staff, "leaky")
    try:
        await socket.send_json_to({"type": "message", "text": "hi", "version": "draft"})
        frames = await frames_until_end(socket, timeout=10)
    finally:
        await socket.disconnect()
    assert frames[-1]["type"] == "error"
    assert "DJANGO_SECRET_KEY" in frames[-1]["message"]
    await sync_to_async(assert_nothing_sent)(server, caplog, str(frames))


@pytest.mark.django_db(transaction=True)
def test_a_version_published_before_the_rule_refuses_without_sending(
    staff: Any, server: ScriptedOpenAiServer, caplog: Any
) -> None:
    version = ChainVersion.objects.get(chain__slug="leaky")
    snapshot = version.snapshot
    snapshot["references"]["chat_model:hosted"]["api_key_env"] = "DJANGO_SECRET_KEY"
    ChainVersion.objects.filter(pk=version.pk).update(snapshot=snapshot)
    clear_cache()
    client = Client()
    client.force_login(staff)  # production: anyone may run it
    answer = client.post(
        "/api/chains/leaky/call/", {"message": "hi"}, content_type="application/json"
    )
    assert answer.status_code == 500  # the deployment's fault: a configuration error
    error = answer.json()["error"]
    assert error["code"] == "chain_misconfigured"
    assert "'DJANGO_SECRET_KEY' may not be read" in error["message"]
    assert_nothing_sent(server, caplog, answer.content.decode())
