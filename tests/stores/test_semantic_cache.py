"""PgVectorSemanticCache on the embedded PostgreSQL: the contract, the advisor, the index."""

from __future__ import annotations

import asyncio

import pytest
from django.db import connection, transaction
from pgvector.django import CosineDistance

from advisors_app.core import (
    OWNER,
    ChatClient,
    ChatClientResponseAccumulator,
    ChatResponse,
    ScriptedChatModel,
)
from advisors_app.core.advisors import SemanticCacheAdvisor
from advisors_app.core.advisors.semantic_cache import CACHE_HIT
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.models import SemanticCacheEntry
from advisors_app.stores.semantic_cache import PgVectorSemanticCache
from tests.core.cache_contract import SCOPE, Clock, SemanticCacheContract
from tests.core.embedding_fakes import HashingEmbeddingModel

pytestmark = pytest.mark.django_db(transaction=True)

MODES = ["call", "stream"]


class TestPgVectorSemanticCache(SemanticCacheContract):
    def make_cache(self, embedding_model, similarity_threshold=0.8, ttl=None, clock=None):
        return PgVectorSemanticCache(
            embedding_model,
            similarity_threshold=similarity_threshold,
            ttl=ttl,
            clock=clock or Clock(),
        )


async def ask(client, text, mode, owner):
    spec = client.prompt(text).advisor_param(OWNER, owner)
    if mode == "call":
        return (await spec.acall()).chat_response()
    accumulator = ChatClientResponseAccumulator()
    async for chunk in spec.stream().chat_client_responses():
        accumulator.add(chunk)
    return accumulator.result().chat_response


@pytest.mark.parametrize("mode", MODES)
async def test_advisor_hit_miss_scope_and_ttl_on_postgresql(mode):
    clock = Clock()
    cache = PgVectorSemanticCache(MiniLmEmbeddingModel(), ttl=600, clock=clock)
    model = ScriptedChatModel(["Paris.", "Bob: Paris.", "Paris, fresh."])
    client = ChatClient(model, default_advisors=[SemanticCacheAdvisor(cache)])

    assert (await ask(client, "What is the capital of France?", mode, "alice")).text == "Paris."
    hit = await ask(client, "What's the capital city of France?", mode, "alice")
    assert hit.text == "Paris." and hit.metadata[CACHE_HIT] is True
    assert (await ask(client, "What is the capital of France?", mode, "bob")).text == (
        "Bob: Paris."
    )
    clock.now += 601
    fresh = await ask(client, "What is the capital of France?", mode, "alice")
    assert fresh.text == "Paris, fresh." and not fresh.metadata.get(CACHE_HIT)
    assert len(model.prompts) == 3
    entry = await SemanticCacheEntry.objects.filter(
        response__generations__0__text="Paris, fresh."
    ).aget()
    assert entry.hit_count == 0 and len(entry.embedding) == 384
    # The expired row of alice's scope was deleted when the fresh answer was written.
    assert await SemanticCacheEntry.objects.acount() == 2


async def test_hits_are_counted():
    cache = PgVectorSemanticCache(HashingEmbeddingModel())
    await cache.set("capital of france", ChatResponse.of_text("Paris"), SCOPE)
    for _ in range(2):
        assert await cache.get("capital of france", SCOPE) is not None
    entry = await SemanticCacheEntry.objects.aget()
    assert entry.hit_count == 2 and entry.last_hit_at is not None


async def test_an_embedding_of_the_wrong_size_is_refused():
    cache = PgVectorSemanticCache(HashingEmbeddingModel(dimensions=8))
    with pytest.raises(ValueError, match="returned 8 dimensions but the semantic cache column"):
        await cache.get("anything", SCOPE)


def test_purge_expired_deletes_only_expired_rows():
    clock = Clock()
    cache = PgVectorSemanticCache(HashingEmbeddingModel(), ttl=10, clock=clock)
    forever = PgVectorSemanticCache(HashingEmbeddingModel(), clock=clock)
    asyncio.run(cache.set("short lived", ChatResponse.of_text("a"), SCOPE))
    asyncio.run(forever.set("kept forever", ChatResponse.of_text("b"), SCOPE))
    clock.now += 11
    assert cache.purge_expired() == 1
    assert list(SemanticCacheEntry.objects.values_list("query", flat=True)) == ["kept forever"]


def test_lookups_use_the_hnsw_cosine_index():
    vector = [1.0] + [0.0] * 383
    SemanticCacheEntry.objects.bulk_create(
        SemanticCacheEntry(
            scope=str(i % 5).rjust(64, "0"), query=str(i), embedding=vector, response={}
        )
        for i in range(300)
    )
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE advisors_app_semanticcacheentry")
    rows = (
        SemanticCacheEntry.objects.filter(scope="0" * 64)
        .annotate(distance=CosineDistance("embedding", vector))
        .order_by("distance")[:1]
    )
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")  # 300 rows: a scan would be cheaper
        plan = rows.explain()
    assert "advisors_semcache_hnsw" in plan, plan
