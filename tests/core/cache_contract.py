"""The SemanticCache contract: one suite, run against every backend (core and Django)."""

from __future__ import annotations

import pytest

from advisors_app.core import ChatResponse, Usage
from advisors_app.core.cache import SemanticCache
from tests.core.embedding_fakes import HashingEmbeddingModel

SCOPE = "a" * 64
OTHER_SCOPE = "b" * 64


class Clock:
    """Seconds that only move when a test says so."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now


class SemanticCacheContract:
    """Subclasses define ``make_cache(embedding_model, similarity_threshold, ttl, clock)``."""

    def make_cache(self, embedding_model, similarity_threshold=0.8, ttl=None, clock=None):
        raise NotImplementedError

    def cache(self, **kwargs) -> SemanticCache:
        kwargs.setdefault("clock", Clock())
        return self.make_cache(HashingEmbeddingModel(), **kwargs)

    async def test_miss_then_hit_on_the_same_and_a_similar_query(self):
        cache = self.cache()
        assert isinstance(cache, SemanticCache)
        assert await cache.get("capital of france", SCOPE) is None
        answer = ChatResponse.of_text("Paris", finish_reason="STOP", usage=Usage(10, 2))
        await cache.set("capital of france", answer, SCOPE)
        hit = await cache.get("capital of france", SCOPE)
        assert hit is not None and hit.similarity == pytest.approx(1.0, abs=1e-5)
        assert hit.query == "capital of france"
        assert hit.response.text == "Paris"
        assert hit.response.result.finish_reason == "STOP"
        assert hit.response.metadata.usage == Usage(0, 0, 0)
        similar = await cache.get("the capital of france", SCOPE)
        assert similar is not None and 0.8 <= similar.similarity < 1.0
        assert await cache.get("weather in rome", SCOPE) is None

    async def test_threshold_is_a_cosine_similarity(self):
        cache = self.cache(similarity_threshold=0.9)
        await cache.set("capital of france", ChatResponse.of_text("Paris"), SCOPE)
        assert await cache.get("the capital of france", SCOPE) is None  # cosine 0.866

    async def test_scopes_never_see_each_other(self):
        cache = self.cache()
        await cache.set("capital of france", ChatResponse.of_text("Paris"), SCOPE)
        assert await cache.get("capital of france", OTHER_SCOPE) is None
        await cache.set("capital of france", ChatResponse.of_text("Paris!"), OTHER_SCOPE)
        assert (await cache.get("capital of france", SCOPE)).response.text == "Paris"

    async def test_a_similar_query_replaces_the_entry(self):
        cache = self.cache()
        await cache.set("capital of france", ChatResponse.of_text("old"), SCOPE)
        await cache.set("the capital of france", ChatResponse.of_text("new"), SCOPE)
        hit = await cache.get("capital of france", SCOPE)
        assert hit.response.text == "new" and hit.query == "the capital of france"

    async def test_entries_expire_after_ttl_seconds(self):
        clock = Clock()
        cache = self.cache(ttl=60, clock=clock)
        await cache.set("capital of france", ChatResponse.of_text("Paris"), SCOPE)
        clock.now += 59
        assert await cache.get("capital of france", SCOPE) is not None
        clock.now += 2
        assert await cache.get("capital of france", SCOPE) is None
        await cache.set("capital of france", ChatResponse.of_text("Paris again"), SCOPE)
        assert (await cache.get("capital of france", SCOPE)).response.text == "Paris again"

    async def test_clear_one_scope_or_all(self):
        cache = self.cache()
        for scope in (SCOPE, OTHER_SCOPE):
            await cache.set("capital of france", ChatResponse.of_text("Paris"), scope)
        await cache.clear(SCOPE)
        assert await cache.get("capital of france", SCOPE) is None
        assert await cache.get("capital of france", OTHER_SCOPE) is not None
        await cache.clear()
        assert await cache.get("capital of france", OTHER_SCOPE) is None

    async def test_a_response_without_generations_is_not_stored(self):
        cache = self.cache()
        await cache.set("capital of france", ChatResponse(()), SCOPE)
        assert await cache.get("capital of france", SCOPE) is None

    def test_settings_are_validated(self):
        with pytest.raises(ValueError, match=r"similarity in \[0, 1\]"):
            self.cache(similarity_threshold=1.2)
        with pytest.raises(ValueError, match="ttl must be positive"):
            self.cache(ttl=0)
