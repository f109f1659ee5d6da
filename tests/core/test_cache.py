"""InMemorySemanticCache against the SemanticCache contract, plus its own bounds."""

from __future__ import annotations

from advisors_app.core import ChatResponse
from advisors_app.core.cache import InMemorySemanticCache, MemoizedEmbeddings
from tests.core.cache_contract import SCOPE, Clock, SemanticCacheContract
from tests.core.embedding_fakes import HashingEmbeddingModel


class TestInMemorySemanticCache(SemanticCacheContract):
    def make_cache(self, embedding_model, similarity_threshold=0.8, ttl=None, clock=None):
        return InMemorySemanticCache(
            embedding_model,
            similarity_threshold=similarity_threshold,
            ttl=ttl,
            clock=clock or Clock(),
        )


async def test_max_entries_drops_the_oldest_writes():
    cache = InMemorySemanticCache(HashingEmbeddingModel(), max_entries=2)
    for word in ("alpha", "beta", "gamma"):
        await cache.set(word, ChatResponse.of_text(word), SCOPE)
    assert await cache.get("alpha", SCOPE) is None
    assert (await cache.get("gamma", SCOPE)).response.text == "gamma"


async def test_memoized_embeddings_embed_each_text_once():
    model = HashingEmbeddingModel()
    memo = MemoizedEmbeddings(model, size=2)
    first = await memo.embed(["a b", "c d", "a b"])
    assert first[0] == first[2] and model.texts == ["a b", "c d"]
    await memo.embed(["c d"])
    assert model.calls == 1
    await memo.embed(["e f"])  # evicts "a b", the least recently used
    await memo.embed(["a b"])
    assert model.texts == ["a b", "c d", "e f", "a b"]
    assert memo.dimensions == 384
