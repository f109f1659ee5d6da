"""Opening a turn: the caller's conversation (continued, owned, of its chain, named by the
client), the params in the request context, and who the turn is for (retrieval and the
semantic cache scoped to the caller)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth.models import Permission

from advisors_app.definition.runtime import clear_cache, load_chain
from advisors_app.ingestion.pipeline import ingest_text
from advisors_app.memory.conversations import find_conversation, public_conversation_id
from advisors_app.models import Collection, Conversation, PromptTemplate
from advisors_app.turn import call_turn, stream_turn
from advisors_app.turn.events import TurnError
from tests.factories import make_chain, scripted_model
from tests.turn_helpers import atranscript, collect, script, script_chain

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    clear_cache()
    yield
    clear_cache()


@pytest.fixture
def user(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("alice", password="pw")


@pytest.fixture
def other(django_user_model: Any) -> Any:
    return django_user_model.objects.create_user("bob", password="pw")


@pytest.fixture
def chain() -> Any:
    return script_chain()


async def test_a_conversation_continues_and_belongs_to_its_owner(
    chain: Any, user: Any, other: Any
) -> None:
    await script(chain.slug, "one", "two", "theirs")
    first = await call_turn(chain.slug, user, "first")
    second = await call_turn(chain.slug, user, "second", conversation_id=first.conversation_id)
    assert second.conversation_id == first.conversation_id
    key = f"{user.pk}:{first.conversation_id}"
    assert [t for _, t, _ in await atranscript(key)] == ["first", "one", "second", "two"]

    # Bob sends Alice's id: it behaves as an id never used, a new conversation of his own.
    stolen = await call_turn(chain.slug, other, "peek", conversation_id=first.conversation_id)
    assert stolen.conversation_id == first.conversation_id
    assert [t for _, t, _ in await atranscript(key)] == ["first", "one", "second", "two"]
    assert [t for _, t, _ in await atranscript(f"{other.pk}:{first.conversation_id}")] == [
        "peek",
        "theirs",
    ]
    mine = await sync_to_async(find_conversation)(user, first.conversation_id)
    assert mine.owner_id == user.pk and mine.title == "first"
    assert public_conversation_id(mine.conversation_id) == first.conversation_id


async def test_a_conversation_of_another_chain_is_refused_and_kept(chain: Any, user: Any) -> None:
    await script(chain.slug, "one")
    first = await call_turn(chain.slug, user, "first")
    other_chain = await sync_to_async(make_chain)("json-answers")
    with pytest.raises(TurnError) as refused:
        await call_turn(other_chain.slug, user, "again", conversation_id=first.conversation_id)
    assert refused.value.code == "conflict" and refused.value.http_status == 409
    assert "start a new conversation" in refused.value.errors["conversation_id"][0]
    key = f"{user.pk}:{first.conversation_id}"
    assert [t for _, t, _ in await atranscript(key)] == ["first", "one"]


async def test_a_client_may_choose_the_id_of_a_new_conversation(chain: Any, user: Any) -> None:
    await script(chain.slug, "ok")
    result = await call_turn(chain.slug, user, "hi", conversation_id="trip-2024.05")
    assert result.conversation_id == "trip-2024.05"
    assert await Conversation.objects.filter(conversation_id=f"{user.pk}:trip-2024.05").aexists()


async def test_a_conversation_started_on_a_draft_stays_on_its_chain(user: Any) -> None:
    """A draft records no version: the chain its turns logged is the one it started on."""
    user.is_staff = True
    await user.asave(update_fields=["is_staff"])
    view = await Permission.objects.aget(codename="view_advisorchain")
    await user.user_permissions.aadd(view)
    model = await sync_to_async(scripted_model)("drafted-model", responses=("ok",))
    drafted = await sync_to_async(make_chain)("drafted", model=model)
    first = await call_turn(drafted.slug, user, "first", version="draft")
    again = await call_turn(drafted.slug, user, "again", conversation_id=first.conversation_id)
    assert again.stored
    other_chain = await sync_to_async(make_chain)("json-answers", model=model)
    for choice in ({}, {"version": "draft"}):
        with pytest.raises(TurnError) as refused:
            await call_turn(
                other_chain.slug, user, "x", conversation_id=first.conversation_id, **choice
            )
        assert refused.value.code == "conflict" and refused.value.http_status == 409


async def test_params_reach_the_model_and_the_advisor_context(user: Any) -> None:
    template = await PromptTemplate.objects.acreate(
        slug="persona", text="You help {name}.", placeholders=["name"]
    )
    chain = await sync_to_async(make_chain)(
        "persona",
        model=await sync_to_async(scripted_model)("persona-model", responses=(), repeat=False),
        advisors=(("append", {"text": "!"}),),
        system_template=template,
    )
    model = await script(chain.slug, "ok", "ok")
    with pytest.raises(TurnError) as caught:
        await call_turn(chain.slug, user, "hi")
    assert caught.value.errors == {"params.system_params": ["This field is required."]}
    params = {
        "system_params": {"name": "Alice"},
        "options": {"temperature": 0.5, "max_tokens": 20},
        "append_flag": True,
    }
    result = await call_turn(chain.slug, user, "hi", params=params, trace_payloads=True)
    prompt = model.prompts[-1]
    assert prompt.system_message.text == "You help Alice."
    assert (prompt.options.temperature, prompt.options.max_tokens) == (0.5, 20)
    context = result.trace["entries"][0]["request"]["context"]
    assert context["append_flag"] is True
    assert context["chat_memory_conversation_id"] == f"{user.pk}:{result.conversation_id}"


@pytest.fixture
def knowledge(user: Any, other: Any) -> Any:
    """A shared collection with a shared document, one of Alice's and one of Bob's."""
    collection = Collection.objects.create(slug="kb", name="KB")
    ingest_text(collection, "policy.md", "Refunds take 5 days.")
    ingest_text(collection, "alice.md", "Alice's refund code is 1234.", owner=user)
    ingest_text(collection, "bob.md", "Bob's refund code is 9876.", owner=other)
    return make_chain(
        "rag",
        model=scripted_model("rag-model", responses=("ok",)),
        advisors=(("question_answer", {"collection": "kb", "top_k": 10}),),
    )


@pytest.mark.parametrize("run", ["call", "stream"])
async def test_retrieval_sees_shared_documents_and_the_callers_own_only(
    knowledge: Any, user: Any, other: Any, run: str
) -> None:
    model = (await sync_to_async(load_chain)(knowledge.slug)).client.chat_model
    for person, mine, theirs in ((user, "1234", "9876"), (other, "9876", "1234")):
        if run == "call":
            await call_turn(knowledge.slug, person, "What is my refund code?")
        else:
            await collect(await stream_turn(knowledge.slug, person, "What is my refund code?"))
        sent = model.prompts[-1].user_message.text
        assert "Refunds take 5 days." in sent and mine in sent
        assert theirs not in sent


async def test_the_semantic_cache_answers_each_user_from_their_own_entries(
    user: Any, other: Any
) -> None:
    chain = await sync_to_async(make_chain)(
        "cached",
        model=await sync_to_async(scripted_model)("cache-model", responses=(), repeat=False),
        advisors=(("semantic_cache", {"similarity_threshold": 0.9}),),
    )
    model = await script(chain.slug, "Alice's answer", "Bob's answer")
    assert (await call_turn(chain.slug, user, "What is a refund?")).content == "Alice's answer"
    again = await call_turn(chain.slug, user, "What is a refund?")
    assert again.content == "Alice's answer" and again.metadata["semantic_cache_hit"] is True
    assert (await call_turn(chain.slug, other, "What is a refund?")).content == "Bob's answer"
    assert len(model.prompts) == 2
