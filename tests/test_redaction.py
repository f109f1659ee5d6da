"""advisors_app.security.redaction: which values are secret, how they are replaced, logs, header
refusals.

Each transport (REST, SSE, websocket, call log, admin page, logs) is tested end to end in
``tests/test_redaction_transports.py``.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from advisors_app.models import ChatModelConfig, EmbeddingModelConfig
from advisors_app.security import redaction
from advisors_app.security.redaction import MARKER, redact, redact_data, secret_header_problems
from tests.factories import make_chain

KEY = "loopback-9f8e7d6c5b4a39281706"  # not shaped like any known key: only configuration finds it


@pytest.fixture(autouse=True)
def names_allowed(settings: Any) -> None:
    """These variables' names say nothing, so the deployment lists them (docs/models.md)."""
    advisors = getattr(settings, "ADVISORS", {})
    settings.ADVISORS = {
        **advisors,
        "PROVIDER_KEY_ENVS": [
            "OPENAI_API_KEY",
            "LOOPBACK_LLM_ACCESS",
            "EMBEDDER_ACCESS",
            *(f"{n}_LLM_ACCESS" for n in ("FIRST", "SECOND", "ASYNC", "BUILT")),
        ],
    }


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing learnt from rows saved by earlier tests, and the database read again."""
    monkeypatch.setattr(redaction, "_saved_names", frozenset())
    monkeypatch.setattr(redaction, "_saved_values", frozenset())
    monkeypatch.setattr(redaction, "_database", (frozenset(), frozenset()))
    monkeypatch.setattr(redaction, "_database_read_at", -math.inf)


def test_the_exported_names_resolve() -> None:
    assert len(set(redaction.__all__)) == len(redaction.__all__)
    for name in redaction.__all__:
        assert hasattr(redaction, name), name


# -- token shapes -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Incorrect API key provided: sk-proj-AbCdEf0123456789xyz. See the docs.",
            f"Incorrect API key provided: {MARKER}. See the docs.",
        ),
        ("masked sk-abc12****************wxyz here", f"masked {MARKER} here"),
        ("Authorization: Bearer eyJhbGciOi.J9x-1_y", f"Authorization: Bearer {MARKER}"),
        ("authorization: basic dXNlcjpwYXNzd29yZDE=", f"authorization: basic {MARKER}"),
    ],
)
def test_credential_shaped_tokens_are_replaced(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Bearer tokens are sent in the Authorization header.",
        "task-0123456789abcdefghij is a job id, sk-short too",
        "",
        "short",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


# -- configured values ------------------------------------------------------------------------


def test_the_key_of_a_settings_alias_is_replaced_and_a_rotated_one_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LOOPBACK_LLM_ACCESS", KEY)
    aliases = {"remote": {"provider": "openai", "model": "m", "api_key_env": "LOOPBACK_LLM_ACCESS"}}
    with override_settings(ADVISORS={"CHAT_MODELS": aliases}):
        assert redact(f"bad key {KEY}!") == f"bad key {MARKER}!"
        monkeypatch.setenv("LOOPBACK_LLM_ACCESS", "rotated-0000111122223333")
        assert redact("bad key rotated-0000111122223333") == f"bad key {MARKER}"
        assert redact(f"old {KEY}") == f"old {KEY}"  # no longer a secret of this process
    assert redact("bad key rotated-0000111122223333") == "bad key rotated-0000111122223333"


def test_openai_api_key_and_django_secrets_are_always_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "plain-openai-value-42")
    with override_settings(
        SECRET_KEY="django-secret-value-for-a-test", SECRET_KEY_FALLBACKS=["older-secret-value-1"]
    ):
        text = "plain-openai-value-42 django-secret-value-for-a-test older-secret-value-1"
        assert redact(text) == f"{MARKER} {MARKER} {MARKER}"


def test_variables_named_like_secrets_are_replaced_but_not_names_of_variables(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PAYMENTS_SERVICE_TOKEN", "tok-value-0987654321")
    monkeypatch.setenv("PGPASSWORD", "a-database-password")
    monkeypatch.setenv("ADVISORS_CHAT_API_KEY_ENV", "MY_PROVIDER_API_KEY")
    monkeypatch.setenv("SHORT_TOKEN", "tiny-tok")  # under 12 characters: a name alone is no proof
    text = "tok-value-0987654321 a-database-password MY_PROVIDER_API_KEY tiny-tok"
    assert redact(text) == f"{MARKER} {MARKER} MY_PROVIDER_API_KEY tiny-tok"


def test_short_values_are_never_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "abc")
    assert redact("abc abc") == "abc abc"


@pytest.mark.django_db
def test_rows_saved_in_this_process_are_known_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOOPBACK_LLM_ACCESS", KEY)
    monkeypatch.setenv("EMBEDDER_ACCESS", "embedder-value-31415926")
    ChatModelConfig.objects.create(
        slug="remote", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
        api_key_env="LOOPBACK_LLM_ACCESS",
    )  # fmt: skip
    EmbeddingModelConfig.objects.create(
        slug="embedder", provider="openai", model="e", base_url="http://127.0.0.1:9/v1",
        api_key_env="EMBEDDER_ACCESS",
    )  # fmt: skip
    assert redact(f"{KEY} / embedder-value-31415926") == f"{MARKER} / {MARKER}"


@pytest.mark.django_db(transaction=True)
def test_rows_and_versions_other_processes_saved_are_read_from_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FIRST_LLM_ACCESS", "first-value-2718281828")
    monkeypatch.setenv("SECOND_LLM_ACCESS", "second-value-1414213562")
    model = ChatModelConfig.objects.create(
        slug="remote", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
        api_key_env="FIRST_LLM_ACCESS",
    )  # fmt: skip
    make_chain("remote-chain", model=model)  # version 1's snapshot names FIRST_LLM_ACCESS
    # Another process renamed the variable (no signal here), and this one knows nothing yet.
    ChatModelConfig.objects.filter(pk=model.pk).update(api_key_env="SECOND_LLM_ACCESS")
    monkeypatch.setattr(redaction, "_saved_names", frozenset())
    text = "first-value-2718281828 second-value-1414213562"
    assert redact(text) == f"{MARKER} {MARKER}"


@pytest.mark.django_db(transaction=True)
async def test_the_database_is_read_from_async_code_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from asgiref.sync import sync_to_async

    monkeypatch.setenv("ASYNC_LLM_ACCESS", "async-value-1234567890")
    await sync_to_async(ChatModelConfig.objects.bulk_create)(
        [ChatModelConfig(slug="a", provider="openai", model="m", api_key_env="ASYNC_LLM_ACCESS")]
    )  # bulk_create sends no signal: only the database says so
    assert redact("async-value-1234567890") == MARKER


@pytest.mark.django_db
def test_a_chain_this_process_builds_teaches_its_key_before_the_next_database_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from advisors_app.definition.runtime import compiled_chain, resolve_target

    monkeypatch.setenv("BUILT_LLM_ACCESS", "built-value-5772156649")
    model = ChatModelConfig.objects.create(
        slug="remote", provider="openai", model="m", base_url="http://127.0.0.1:9/v1",
        api_key_env="BUILT_LLM_ACCESS",
    )  # fmt: skip
    make_chain("remote-chain", model=model)
    # Saved by another process: this one learnt nothing from signals, and read the database
    # just before (the next read is up to DATABASE_TTL seconds away; none during this test,
    # however slow the run).
    monkeypatch.setattr(redaction, "_saved_names", frozenset())
    monkeypatch.setattr(redaction, "_saved_values", frozenset())
    monkeypatch.setattr(redaction, "_database_read_at", time.monotonic())
    monkeypatch.setattr(redaction, "DATABASE_TTL", math.inf)
    assert redact("built-value-5772156649") == "built-value-5772156649"
    compiled_chain(resolve_target("remote-chain"))
    assert redact("built-value-5772156649") == MARKER


def test_the_database_is_read_at_most_once_per_ttl(monkeypatch: pytest.MonkeyPatch) -> None:
    reads: list[float] = []

    def query() -> tuple[frozenset[str], frozenset[str]]:
        reads.append(time.monotonic())
        return frozenset(), frozenset()

    monkeypatch.setattr(redaction, "_query_database", query)
    monkeypatch.setattr(redaction, "DATABASE_TTL", math.inf)  # none runs out during the loop
    for _ in range(50):
        redact("some text to redact")
    assert len(reads) == 1
    monkeypatch.setattr(redaction, "DATABASE_TTL", 60.0)
    monkeypatch.setattr(redaction, "_database_read_at", time.monotonic() - 61)  # one ran out
    redact("some text to redact")
    assert len(reads) == 2


# -- nested data ------------------------------------------------------------------------------


def test_redact_data_walks_dicts_lists_and_tuples(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    trace = {
        "entries": [
            {"name": "model", "error": f"AuthenticationError: key {KEY}", "duration": 0.5},
            {"name": "x", "tags": (KEY, 3, None, True)},
        ],
        KEY: "a key as a key",
    }
    assert redact_data(trace) == {
        "entries": [
            {"name": "model", "error": f"AuthenticationError: key {MARKER}", "duration": 0.5},
            {"name": "x", "tags": (MARKER, 3, None, True)},
        ],
        MARKER: "a key as a key",
    }
    assert trace["entries"][0]["error"].endswith(KEY)  # the input is not changed


# -- logs -------------------------------------------------------------------------------------


def test_every_log_record_is_redacted_message_and_traceback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    log = logging.getLogger("some.library.anywhere")
    with caplog.at_level(logging.DEBUG):
        try:
            raise RuntimeError(f"Incorrect API key provided: {KEY}")
        except RuntimeError:
            log.exception("provider said %s", f"no to {KEY}")
        log.warning("nothing secret in %s", "here")
    assert KEY not in caplog.text
    assert f"provider said no to {MARKER}" in caplog.text
    assert f"RuntimeError: Incorrect API key provided: {MARKER}" in caplog.text
    clean = caplog.records[-1]
    assert (clean.msg, clean.args) == ("nothing secret in %s", ("here",))  # left as it was


# -- secrets in headers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"Authorization": "Bearer abc"},
        {"X-Api-Key": "anything"},
        {"api-key": "x"},
        {"Cookie": "session=1"},
        {"X-Gateway": "Bearer 0123456789abcdef"},
        {"X-Gateway": "sk-0123456789abcdefghij"},
    ],
)
def test_credentials_in_headers_are_refused_without_quoting_them(headers: dict[str, str]) -> None:
    problems = secret_header_problems(headers)
    assert len(problems) == 1
    assert "api_key_env" in problems[0]
    value = next(iter(headers.values()))
    assert len(value) < 4 or value not in problems[0]


def test_a_configured_key_in_any_header_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert len(secret_header_problems({"X-Custom": KEY})) == 1


def test_plain_headers_are_accepted() -> None:
    headers = {"OpenAI-Organization": "org-123", "OpenAI-Beta": "assistants=v2", "X-Title": "Hi"}
    assert secret_header_problems(headers) == []
    assert secret_header_problems(None) == []


@pytest.mark.django_db
@pytest.mark.parametrize("model", [ChatModelConfig, EmbeddingModelConfig])
def test_model_configs_refuse_credential_headers_on_the_settings_field(model: Any) -> None:
    row = model(
        slug="remote",
        provider="openai",
        model="m",
        base_url="http://127.0.0.1:9/v1",
        settings={"headers": {"Authorization": "Bearer real-0123456789"}},
    )
    with pytest.raises(ValidationError) as refused:
        row.full_clean()
    messages = refused.value.message_dict["settings"]
    assert any("headers['Authorization']" in m and "api_key_env" in m for m in messages)
    assert "real-0123456789" not in str(messages)
    row.settings = {"headers": {"OpenAI-Organization": "org-123"}}
    row.full_clean()


@pytest.mark.django_db
def test_the_admin_form_shows_the_refusal_and_stores_nothing(admin_client: Any) -> None:
    form = {
        "slug": "remote",
        "name": "",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": "",
        "timeout": "60",
        "max_retries": "2",
        "options": "{}",
        "settings": '{"headers": {"X-Api-Key": "a-real-key-0123456789"}}',
    }
    page = admin_client.post("/admin/advisors_app/chatmodelconfig/add/", form)
    assert page.status_code == 200
    assert "would store a credential" in page.content.decode()
    assert not ChatModelConfig.objects.exists()


# -- cost -------------------------------------------------------------------------------------


def test_redacting_stays_cheap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    redact("warm up")
    message = "the provider answered 401: Incorrect API key provided (request 42)"
    started = time.perf_counter()
    for _ in range(1000):
        redact(message)
    per_call = (time.perf_counter() - started) / 1000
    text = ("All work and no play makes a dull answer. " * 2500)[:100_000]
    started = time.perf_counter()
    redact(text)
    per_100k = time.perf_counter() - started
    # Generous bounds for a loaded machine; typical figures are ~100x lower.
    assert per_call < 1e-3, per_call
    assert per_100k < 0.25, per_100k
