"""The offline default embedding model gives unit-norm 384-d vectors that rank meaning."""

from __future__ import annotations

import math

import pytest

from advisors_app.core import EmbeddingModel
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


async def test_vectors_are_384_dimensional_and_unit_norm():
    model = MiniLmEmbeddingModel()
    assert isinstance(model, EmbeddingModel)
    vectors = await model.embed(["first text", "second, longer text " * 50])
    assert model.dimensions == 384
    assert [len(v) for v in vectors] == [384, 384]
    assert all(math.isclose(math.sqrt(cosine(v, v)), 1.0, abs_tol=1e-5) for v in vectors)


async def test_a_paraphrase_ranks_above_an_unrelated_sentence():
    model = MiniLmEmbeddingModel()
    query, paraphrase, unrelated = await model.embed(
        [
            "How do I reset my password?",
            "I forgot my login credentials",
            "It is sunny in Oslo today",
        ]
    )
    assert cosine(query, paraphrase) > 0.5 > cosine(query, unrelated)


async def test_batches_keep_input_order():
    model = MiniLmEmbeddingModel()
    texts = [f"sentence number {i}" for i in range(70)]
    together = await model.embed(texts)
    alone = await model.embed([texts[45]])
    assert cosine(together[45], alone[0]) > 0.9999
    assert await model.embed([]) == []


def test_a_single_string_is_refused():
    with pytest.raises(TypeError, match="sequence of texts"):
        MiniLmEmbeddingModel().embed_sync("not a list")
