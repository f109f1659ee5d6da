"""Building chains from rows, the per-process cache, and its invalidation across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.test import override_settings

from advisors_app.configuration import refresh_chain
from advisors_app.core import UserMessage
from advisors_app.models import (
    AdvisorChain,
    AdvisorConfig,
    ChatModelConfig,
    Collection,
    EmbeddingModelConfig,
    PromptTemplate,
    SensitiveWordList,
)
from advisors_app.registry import AdvisorType, advisor_types
from advisors_app.runtime import (
    ChainConfigurationError,
    ChainNotFound,
    CompiledChain,
    clear_cache,
    load_chain,
)
from tests.factories import make_chain
from tests.helpers import database_url_for_subprocess, subprocess_env

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


def ask(compiled: CompiledChain, text: str = "hi") -> str:
    return async_to_sync(compiled.client.prompt(text).acall)().content()


@pytest.mark.django_db
def test_a_stored_chain_answers_with_its_system_options_and_advisors_in_order() -> None:
    chain = make_chain(
        advisors=(("append", {"text": " [second]"}, 20), ("append", {"text": " [first]"}, 10)),
        system_prompt="Be brief.",
        default_options={"temperature": 0.25},
    )
    compiled = load_chain(chain.slug)
    assert ask(compiled) == "Hello!"
    prompt = compiled.client.chat_model.prompts[-1]
    assert prompt.system_message.text == "Be brief."
    assert prompt.user_message == UserMessage("hi [first] [second]")
    assert prompt.options.temperature == 0.25
    assert [a.order for a in compiled.advisors] == [10, 20]
    assert not compiled.has_memory


@pytest.mark.django_db
def test_the_built_chain_is_cached_until_its_configuration_changes() -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    first = load_chain(chain.slug)
    assert load_chain(chain.slug) is first
    row = chain.advisors.get()
    row.params = {"text": "?"}
    row.save()
    second = load_chain(chain.slug)
    assert second is not first
    assert second.config_hash != first.config_hash
    assert ask(second) == "Hello!"
    assert second.client.chat_model.prompts[-1].user_message.text == "hi?"


@pytest.mark.django_db
def test_unknown_and_disabled_chains_are_not_found() -> None:
    with pytest.raises(ChainNotFound):
        load_chain("nope")
    make_chain("off", enabled=False)
    with pytest.raises(ChainNotFound):
        load_chain("off")


@pytest.mark.django_db
def test_a_chain_that_cannot_be_built_says_which_advisor_and_why() -> None:
    chain = make_chain()
    row = AdvisorConfig.objects.create(chain=chain, advisor_type="vanished", params={})
    with pytest.raises(
        ChainConfigurationError, match=f"advisor {row.pk} has the unregistered type 'vanished'"
    ):
        load_chain(chain.slug)
    row.advisor_type, row.params = "append", {"text": 1}
    row.save()
    with pytest.raises(ChainConfigurationError, match=r"params.text: 1 is not of type 'string'"):
        load_chain(chain.slug)
    row.params = {"text": "!", "note": "missing"}
    row.save()
    with pytest.raises(
        ChainConfigurationError, match=r"params\.note: no sensitive-word list with slug 'missing'"
    ):
        load_chain(chain.slug)
    SensitiveWordList.objects.create(slug="missing", words=["x"])
    assert ask(load_chain(chain.slug)) == "Hello!"


class _Broken:
    def __init__(self, order: int) -> None:
        self.missing_attribute.order = order  # a project's factory with a bug


@pytest.mark.django_db
def test_an_advisor_factory_that_fails_names_its_row_and_error() -> None:
    advisor_types.register(AdvisorType(key="broken", label="Broken", factory=lambda s: _Broken(0)))
    try:
        row = AdvisorConfig.objects.create(chain=make_chain(), advisor_type="broken", params={})
        with pytest.raises(ChainConfigurationError) as caught:
            load_chain("support")
        assert str(caught.value) == (
            f"chain 'support', advisor {row.pk} (broken): AttributeError: "
            "'_Broken' object has no attribute 'missing_attribute'"
        )
    finally:
        advisor_types.unregister("broken")


@pytest.mark.django_db
def test_a_system_template_with_placeholders_becomes_a_request_param() -> None:
    template = PromptTemplate.objects.create(
        slug="persona", text="You help {name} in {lang}.", placeholders=["name", "lang"]
    )
    compiled = load_chain(make_chain(system_template=template).slug)
    assert compiled.system_template is not None
    assert compiled.system_template.placeholders == ("name", "lang")
    system_params = compiled.params_schema["properties"]["system_params"]
    assert system_params["required"] == ["name", "lang"]
    plain = PromptTemplate.objects.create(slug="plain", text="Be {{brief}}.")
    compiled = load_chain(make_chain("plain", system_template=plain).slug)
    assert compiled.system_template is None
    assert compiled.client.default_system == "Be {brief}."


@pytest.mark.django_db
def test_the_request_params_schema_lists_what_the_chain_accepts() -> None:
    compiled = load_chain(make_chain(advisors=(("append", {"text": "!"}),)).slug)
    properties = compiled.params_schema["properties"]
    assert set(properties) == {"options", "append_flag"}
    assert "model" not in properties["options"]["properties"]
    assert "temperature" in properties["options"]["properties"]


class Worker:
    """A long-lived Django process speaking the ``tests.runtime_worker`` protocol."""

    def __init__(self) -> None:
        env = subprocess_env(
            DJANGO_SETTINGS_MODULE="tests.settings", DATABASE_URL=database_url_for_subprocess()
        )
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.runtime_worker"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def send(self, **command: object) -> dict:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, f"worker exited with {self.process.wait()}"
        return json.loads(line)

    def close(self) -> None:
        assert self.process.stdin
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_change_made_in_one_process_is_used_by_another_on_its_next_request() -> None:
    chain = make_chain(advisors=(("append", {"text": " [a]"}, 1), ("append", {"text": " [b]"}, 2)))
    first_row = chain.advisors.get(params__text=" [a]")
    reader, writer = Worker(), Worker()
    try:
        one = reader.send(op="run", slug=chain.slug)
        assert one["user_text"] == "hi [a] [b]"
        again = reader.send(op="run", slug=chain.slug)
        assert again["compiled"] == one["compiled"]  # cached: no rebuild without a change

        assert writer.send(op="set_order", advisor=first_row.pk, order=3) == {"ok": True}
        changed = reader.send(op="run", slug=chain.slug)
        assert changed["user_text"] == "hi [b] [a]"
        assert changed["config_hash"] != one["config_hash"]
        assert changed["compiled"] != one["compiled"]

        # And back from this process: both workers follow the stored hash.
        first_row.order = 1
        first_row.save()
        assert reader.send(op="run", slug=chain.slug)["user_text"] == "hi [a] [b]"
        assert writer.send(op="run", slug=chain.slug)["user_text"] == "hi [a] [b]"
    finally:
        reader.close()
        writer.close()


@pytest.mark.django_db
def test_without_a_chat_model_the_default_alias_from_settings_is_used() -> None:
    chain = AdvisorChain.objects.create(slug="plain", name="Plain")
    assert type(load_chain("plain").client.chat_model).__name__ == "SmolLm2ChatModel"
    scripted = {"provider": "scripted", "responses": ["From settings."]}
    with override_settings(
        ADVISORS={"CHAT_MODELS": {"fake": scripted}, "DEFAULT_CHAT_MODEL": "fake"}
    ):
        refresh_chain(chain)
        assert ask(load_chain("plain")) == "From settings."
        # A model-config row with the alias's slug wins over the settings.
        ChatModelConfig.objects.create(
            slug="fake", provider="scripted", settings={"responses": ["From the row."]}
        )
        assert ask(load_chain("plain")) == "From the row."


@pytest.mark.django_db
def test_embedding_models_must_match_the_stored_dimensions() -> None:
    Collection.objects.create(slug="kb", name="KB")
    EmbeddingModelConfig.objects.create(slug="mini")
    EmbeddingModelConfig.objects.create(
        slug="big", provider="openai", model="text-embedding-3-small", dimensions=1536
    )
    row = ("question_answer", {"collection": "kb", "embedding_model": "mini"})
    chain = make_chain(advisors=(row,))
    assert ask(load_chain(chain.slug)) == "Hello!"
    advisor = chain.advisors.get()
    advisor.params = {"collection": "kb", "embedding_model": "big"}
    advisor.save()
    with pytest.raises(ChainConfigurationError, match="1536"):
        load_chain(chain.slug)
