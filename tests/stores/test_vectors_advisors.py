"""The retrieval advisors on PgVectorStore, in call and stream: QA with per-call filters (B19,
ANDed with the configured one since issue 18), long-term memory per conversation, RAG with a
user-scoped store."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.contrib.auth import get_user_model

from advisors_app.core import CONVERSATION_ID, ChatClient, ScriptedChatModel
from advisors_app.core.advisors import (
    FILTER_EXPRESSION,
    RETRIEVED_DOCUMENTS,
    QuestionAnswerAdvisor,
    VectorStoreChatMemoryAdvisor,
)
from advisors_app.core.rag import (
    DOCUMENT_CONTEXT,
    RetrievalAugmentationAdvisor,
    VectorStoreDocumentRetriever,
)
from advisors_app.core.vectorstore import And, Document, Eq, Gte, SearchRequest
from advisors_app.models import Collection
from advisors_app.stores.vectors import PgVectorStore
from tests.embeddings import WordEmbeddingModel

pytestmark = pytest.mark.django_db(transaction=True)


@sync_to_async
def make_store(slug="kb", **options):
    collection, _ = Collection.objects.get_or_create(slug=slug, defaults={"name": slug})
    return PgVectorStore(collection, WordEmbeddingModel(), **options)


async def answer(client, mode, text, **params):
    spec = client.prompt(text).advisor_params(params)
    if mode == "call":
        return (await spec.acall()).chat_client_response()
    return await spec.stream().aggregate()


@pytest.mark.parametrize("mode", ["call", "stream"])
@pytest.mark.parametrize(
    ("default", "per_call", "expected"),
    [
        (None, And(Eq("tenant", "t1"), Gte("year", 2020)), ["t1-2021"]),
        (None, "tenant == 't1' && year >= 2020", ["t1-2021"]),
        ("genre == 'drama'", "", ["drama"]),
        # Issue 18: ANDed with the configured filter, B19's per-call filter finds nothing.
        ("genre == 'drama'", "tenant == 't1' && year >= 2020", []),
        ("tenant == 't1'", "tenant == 't1' || tenant == 't2'", ["t1-2021", "t1-2019"]),
    ],
)
async def test_b19_question_answer_on_pgvector(mode, default, per_call, expected):
    store = await make_store()
    await store.aadd(
        [
            Document("report 2021", {"tenant": "t1", "year": 2021}, id="t1-2021"),
            Document("report 2019", {"tenant": "t1", "year": 2019}, id="t1-2019"),
            Document("report 2022", {"tenant": "t2", "year": 2022}, id="t2-2022"),
            Document("drama report", {"genre": "drama"}, id="drama"),
        ]
    )
    advisor = QuestionAnswerAdvisor(store, SearchRequest(top_k=10, filter_expression=default))
    model = ScriptedChatModel(["ok"])
    response = await answer(
        ChatClient(model, default_advisors=[advisor]),
        mode,
        "report",
        **{FILTER_EXPRESSION: per_call},
    )
    found = response.chat_response.metadata[RETRIEVED_DOCUMENTS]
    assert sorted(d.id for d in found) == sorted(expected)
    assert ("<document>" in model.prompts[0].user_message.text) is bool(expected)


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_long_term_memory_on_pgvector_is_per_conversation(mode):
    store = await make_store("memory")
    advisor = VectorStoreChatMemoryAdvisor(store, top_k=5)
    model = ScriptedChatModel(["Noted.", "Noted.", "You live in Oslo."])
    client = ChatClient(model, default_system="Be brief.", default_advisors=[advisor])
    await answer(client, mode, "I live in Oslo", **{CONVERSATION_ID: "c1"})
    await answer(client, mode, "I live in Rome", **{CONVERSATION_ID: "c2"})
    await answer(client, mode, "Where do I live?", **{CONVERSATION_ID: "c1"})
    system = model.prompts[2].instructions[0].text
    assert system.startswith("Be brief.\n\nUse the long term conversation memory")
    assert '<memory-entry type="user">I live in Oslo</memory-entry>' in system
    assert '<memory-entry type="assistant">Noted.</memory-entry>' in system
    assert "Rome" not in system


@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_rag_with_a_user_scoped_store_never_sees_other_users_rows(mode):
    User = get_user_model()
    alice, bob = (
        await User.objects.acreate(username="alice"),
        await User.objects.acreate(username="bob"),
    )
    await make_store()
    as_bob = await sync_to_async(PgVectorStore.for_user)("kb", bob, WordEmbeddingModel())
    as_alice = await sync_to_async(PgVectorStore.for_user)("kb", alice, WordEmbeddingModel())
    await as_bob.aadd([Document("bob secret salary", id="bob")])
    await as_alice.aadd([Document("alice salary notes", id="alice")])
    advisor = RetrievalAugmentationAdvisor(
        VectorStoreDocumentRetriever(as_alice, top_k=10, filter_expression="x == 1 || x != 1")
    )
    model = ScriptedChatModel(["ok"])
    response = await answer(ChatClient(model, default_advisors=[advisor]), mode, "salary")
    assert [d.id for d in response.chat_response.metadata[DOCUMENT_CONTEXT]] == ["alice"]
    assert "bob secret" not in model.prompts[0].user_message.text
