"""Serving chain versions: labels, the per-process cache by snapshot hash, and label moves seen
across processes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction
from django.db.models import ProtectedError, RestrictedError
from django.test import override_settings

from advisors_app.core import UserMessage
from advisors_app.definition import (
    PublishError,
    VersionLookupError,
    move_label,
    publish,
    rollback,
    rollback_target,
)
from advisors_app.definition.registry import AdvisorType, advisor_types
from advisors_app.definition.runtime import (
    DRAFT,
    ChainConfigurationError,
    ChainNotFound,
    CompiledChain,
    VersionNotFound,
    clear_cache,
    load_chain,
)
from advisors_app.models import (
    PRODUCTION,
    AdvisorChain,
    AdvisorConfig,
    ChatModelConfig,
    Collection,
    Conversation,
    EmbeddingModelConfig,
    PromptTemplate,
    SensitiveWordList,
    VersionPolicy,
)
from advisors_app.models.versions import ImmutableVersionError
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
def test_the_built_chain_is_cached_by_version_and_edits_wait_for_publishing() -> None:
    chain = make_chain(advisors=(("append", {"text": "!"}),))
    first = load_chain(chain.slug)
    assert load_chain(chain.slug) is first
    row = chain.advisors.get()
    row.params = {"text": "?"}
    row.save()
    assert load_chain(chain.slug) is first  # the draft changed, production did not
    assert load_chain(chain.slug, version=DRAFT).client.chat_model is not first.client.chat_model
    version, created = publish(chain, message="question mark")
    assert created and version.number == 2
    assert load_chain(chain.slug) is first  # published, not promoted
    assert load_chain(chain.slug, version=2).snapshot_hash == version.snapshot_hash
    move_label(chain, PRODUCTION, version)
    second = load_chain(chain.slug)
    assert second is not first and second.snapshot_hash != first.snapshot_hash
    assert ask(second) == "Hello!"
    assert second.client.chat_model.prompts[-1].user_message.text == "hi?"
    # Publishing again without a change stores nothing new.
    assert publish(chain) == (version, False)


@pytest.mark.django_db
def test_unknown_disabled_and_unpublished_chains() -> None:
    with pytest.raises(ChainNotFound):
        load_chain("nope")
    make_chain("off", enabled=False)
    with pytest.raises(ChainNotFound):
        load_chain("off")
    make_chain("unpublished", publish=False)
    with pytest.raises(VersionNotFound, match="has no published version yet"):
        load_chain("unpublished")
    make_chain("labelled")
    with pytest.raises(VersionNotFound, match="has no label 'staging'"):
        load_chain("labelled", label="staging")
    with pytest.raises(VersionNotFound, match="has no version 7"):
        load_chain("labelled", version=7)


@pytest.mark.django_db
def test_a_chain_that_cannot_be_built_cannot_be_published_and_says_why() -> None:
    chain = make_chain()
    row = AdvisorConfig.objects.create(chain=chain, advisor_type="vanished", params={})
    with pytest.raises(PublishError, match=r"E108: advisor #1 \(vanished\): unknown advisor"):
        publish(chain)
    row.advisor_type, row.params = "append", {"text": 1}
    row.save()
    with pytest.raises(PublishError, match=r"params.text: 1 is not of type 'string'"):
        publish(chain)
    row.params = {"text": "!", "note": "missing"}
    row.save()
    with pytest.raises(PublishError, match=r"params\.note: no sensitive-word list with slug"):
        publish(chain)
    SensitiveWordList.objects.create(slug="missing", words=["x"])
    version, _ = publish(chain)
    assert ask(load_chain(chain.slug, version=version.number)) == "Hello!"
    assert chain.versions.count() == 2


class _Broken:
    def __init__(self, order: int) -> None:
        self.missing_attribute.order = order  # a project's factory with a bug


@pytest.mark.django_db
def test_an_advisor_factory_that_fails_blocks_publishing_naming_its_row_and_error() -> None:
    advisor_types.register(AdvisorType(key="broken", label="Broken", factory=lambda s: _Broken(0)))
    try:
        chain = make_chain(publish=False)
        AdvisorConfig.objects.create(chain=chain, advisor_type="broken", params={})
        with pytest.raises(PublishError) as caught:
            publish(chain)
        [error] = caught.value.messages
        assert error.id == "advisors_app.E113"
        assert error.message == (
            "the chain cannot be built: advisor #1 (broken): AttributeError: "
            "'_Broken' object has no attribute 'missing_attribute'"
        )
        assert not chain.versions.exists()
    finally:
        advisor_types.unregister("broken")


@pytest.mark.django_db
def test_editing_a_referenced_template_never_changes_what_production_serves() -> None:
    template = PromptTemplate.objects.create(slug="sys", text="You are terse.")
    chain = make_chain(system_template=template)
    assert load_chain(chain.slug).client.default_system == "You are terse."
    template.text = "You are chatty."
    template.save()
    clear_cache()  # even rebuilt from the database, production keeps its own copy
    assert load_chain(chain.slug).client.default_system == "You are terse."
    assert load_chain(chain.slug, version=DRAFT).client.default_system == "You are chatty."


@pytest.mark.django_db
def test_rows_a_labelled_version_refers_to_cannot_be_deleted() -> None:
    Collection.objects.create(slug="kb", name="KB")
    words = SensitiveWordList.objects.create(slug="bad", words=["bomb"])
    make_chain(
        advisors=(
            ("question_answer", {"collection": "kb"}),
            ("safe_guard", {"word_lists": ["bad"]}),
        )
    )
    # Refused inside the delete's own transaction: the caller's transaction is left usable
    # only when it wraps the delete in a savepoint, as with any database error.
    with (
        pytest.raises(ProtectedError, match=r"chain 'support' v1 \(production\) refer to it"),
        transaction.atomic(),
    ):
        Collection.objects.get(slug="kb").delete()
    with (
        pytest.raises(ProtectedError, match="Cannot delete sensitive-word list 'bad'"),
        transaction.atomic(),
    ):
        words.delete()
    assert Collection.objects.filter(slug="kb").exists()
    # A row only a draft refers to may go (the draft's lint reports it).
    spare = SensitiveWordList.objects.create(slug="spare", words=["x"])
    spare.delete()


@pytest.mark.django_db
def test_versions_are_immutable_and_kept_while_referenced() -> None:
    chain = make_chain()
    version = chain.versions.get()
    version.message = "rewritten"
    with pytest.raises(ImmutableVersionError):
        version.save()
    with pytest.raises(RestrictedError):
        version.delete()  # production points at it


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
def test_a_label_moved_in_one_process_is_served_by_another_on_its_next_request() -> None:
    chain = make_chain(advisors=(("append", {"text": " [a]"}, 1), ("append", {"text": " [b]"}, 2)))
    chain.advisors.filter(params__text=" [a]").update(order=3)
    publish(chain, message="b before a")
    reader, writer = Worker(), Worker()
    try:
        one = reader.send(op="run", slug=chain.slug)
        assert one["user_text"] == "hi [a] [b]"
        again = reader.send(op="run", slug=chain.slug)
        assert again["compiled"] == one["compiled"]  # cached: no rebuild without a move

        assert writer.send(op="move", slug=chain.slug, label="production", version=2) == {
            "ok": True
        }
        moved = reader.send(op="run", slug=chain.slug)
        assert moved["user_text"] == "hi [b] [a]"
        assert moved["snapshot_hash"] != one["snapshot_hash"]

        # Rolled back from this process: both workers follow the label, and the reader
        # serves the version it built before without building it again.
        rollback(chain, PRODUCTION, reason="b before a was wrong")
        back = reader.send(op="run", slug=chain.slug)
        assert back["user_text"] == "hi [a] [b]" and back["compiled"] == one["compiled"]
        assert writer.send(op="run", slug=chain.slug)["user_text"] == "hi [a] [b]"
    finally:
        reader.close()
        writer.close()


@pytest.mark.django_db
def test_without_a_chat_model_the_default_alias_from_settings_is_used() -> None:
    chain = AdvisorChain.objects.create(slug="plain", name="Plain")
    publish(chain)
    assert type(load_chain("plain").client.chat_model).__name__ == "SmolLm2ChatModel"
    scripted = {"provider": "scripted", "responses": ["From settings."]}
    with override_settings(
        ADVISORS={"CHAT_MODELS": {"fake": scripted}, "DEFAULT_CHAT_MODEL": "fake"}
    ):
        assert ask(load_chain("plain", version=DRAFT)) == "From settings."
        # A model-config row with the alias's slug wins over the settings.
        ChatModelConfig.objects.create(
            slug="fake", provider="scripted", settings={"responses": ["From the row."]}
        )
        assert ask(load_chain("plain", version=DRAFT)) == "From the row."


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
    with pytest.raises(PublishError, match="1536"):
        publish(chain)
    with pytest.raises(ChainConfigurationError, match="1536"):
        load_chain(chain.slug, version=DRAFT)


@pytest.mark.django_db
def test_a_version_pinned_by_conversations_keeps_its_rows_until_the_chain_follows_its_label(
    django_user_model: Any,
) -> None:
    Collection.objects.create(slug="kb", name="KB")
    chain = make_chain(advisors=(("question_answer", {"collection": "kb"}),))
    first = chain.versions.get()
    user = django_user_model.objects.create_user("pinned")
    Conversation.objects.create(conversation_id=f"{user.pk}:c1", owner=user, chain_version=first)
    chain.advisors.all().delete()
    second, _ = publish(chain)
    move_label(chain, PRODUCTION, second)  # v1 has no label now, but a conversation runs it
    with (
        pytest.raises(ProtectedError, match=r"v1 \(conversations pinned to it\)"),
        transaction.atomic(),
    ):
        Collection.objects.get(slug="kb").delete()
    AdvisorChain.objects.filter(pk=chain.pk).update(version_policy=VersionPolicy.FOLLOW_LABEL)
    Collection.objects.get(slug="kb").delete()


@pytest.mark.django_db
def test_rolling_back_steps_back_through_the_history_not_back_and_forth() -> None:
    chain = make_chain()
    one = chain.versions.get()
    versions = [one]
    for text in ("two", "three"):
        chain.system_prompt = text
        chain.save()
        version, _ = publish(chain)
        move_label(chain, PRODUCTION, version)
        versions.append(version)
    label = chain.labels.get(name=PRODUCTION)
    assert rollback_target(label) == versions[1]
    assert rollback(chain, PRODUCTION).version == versions[1]
    assert rollback(chain, PRODUCTION).version == one  # not back to v3
    with pytest.raises(VersionLookupError, match="nothing to roll back to"):
        rollback(chain, PRODUCTION)
    events = list(label.events.order_by("at", "id").values_list("rollback", flat=True))
    assert events == [False, False, False, True, True]


@pytest.mark.django_db
def test_editing_the_default_models_row_waits_for_publishing_like_any_reference() -> None:
    scripted = {"provider": "scripted", "responses": ["From settings."]}
    with override_settings(
        ADVISORS={"CHAT_MODELS": {"fake": scripted}, "DEFAULT_CHAT_MODEL": "fake"}
    ):
        row = ChatModelConfig.objects.create(
            slug="fake", provider="scripted", settings={"responses": ["Published."]}
        )
        chain = AdvisorChain.objects.create(slug="plain", name="Plain")
        publish(chain)
        assert ask(load_chain("plain")) == "Published."
        row.settings = {"responses": ["Edited."]}
        row.save()
        clear_cache()
        assert ask(load_chain("plain")) == "Published."
        assert ask(load_chain("plain", version=DRAFT)) == "Edited."
        version, created = publish(chain)
        assert created  # the draft's snapshot holds the row, so the edit is a new version
        move_label(chain, PRODUCTION, version)
        assert ask(load_chain("plain")) == "Edited."
    # A deployment whose default is another alias runs the chain on that one.
    other = {"provider": "scripted", "responses": ["Elsewhere."]}
    with override_settings(
        ADVISORS={"CHAT_MODELS": {"other": other}, "DEFAULT_CHAT_MODEL": "other"}
    ):
        assert ask(load_chain("plain")) == "Elsewhere."
