"""``OpenAiCompatibleEmbeddingModel`` against a scripted loopback server."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    AuthenticationError,
    EmbeddingModel,
    MalformedResponseError,
    RateLimitedError,
)
from advisors_app.core.providers.openai_compatible import OpenAiCompatibleEmbeddingModel
from tests.core.providers.openai_server import Embeddings, JsonReply, ScriptedOpenAiServer


def model_on(server: ScriptedOpenAiServer, **kwargs) -> OpenAiCompatibleEmbeddingModel:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("model", "scripted-embedding")
    kwargs.setdefault("dimensions", 3)
    return OpenAiCompatibleEmbeddingModel(base_url=server.base_url, **kwargs)


async def test_batches_keep_input_order_even_when_the_server_does_not(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(Embeddings(reverse=True), Embeddings(), Embeddings(reverse=True))
    model = model_on(openai_server, batch_size=2)
    assert isinstance(model, EmbeddingModel)
    texts = ["a", "bb", "ccc", "dddd", "eeeee"]
    vectors = await model.embed(texts)
    assert [request.body["input"] for request in openai_server.requests] == [
        ["a", "bb"],
        ["ccc", "dddd"],
        ["eeeee"],
    ]
    assert all(r.body["encoding_format"] == "float" for r in openai_server.requests)
    # Each vector is [index in its batch, len(text), 1.0].
    assert [v[1] for v in vectors] == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert [v[0] for v in vectors] == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert await model.embed([]) == []
    with pytest.raises(TypeError, match="sequence of texts"):
        await model.embed("one string")


async def test_dimensions_are_checked_and_sent_on_request(
    openai_server: ScriptedOpenAiServer,
) -> None:
    openai_server.add(Embeddings(dimensions=4), Embeddings(dimensions=4), Embeddings(dimensions=3))
    model = model_on(openai_server, dimensions=4)
    assert model.dimensions == 4
    assert len((await model.embed(["x"]))[0]) == 4
    assert "dimensions" not in openai_server.bodies[0]
    shortened = model_on(openai_server, dimensions=4, send_dimensions=True)
    await shortened.embed(["x"])
    assert openai_server.bodies[1]["dimensions"] == 4
    with pytest.raises(MalformedResponseError, match=r"\[3\] dimensions, expected 4"):
        await model.embed(["x"])


def test_dimensions_must_be_known() -> None:
    assert OpenAiCompatibleEmbeddingModel(model="text-embedding-3-small").dimensions == 1536
    with pytest.raises(ValueError, match="dimensions of embedding model 'nomic' must be given"):
        OpenAiCompatibleEmbeddingModel(model="nomic")


async def test_a_short_answer_is_malformed(openai_server: ScriptedOpenAiServer) -> None:
    openai_server.add(JsonReply({"object": "list", "data": [], "model": "m"}))
    with pytest.raises(MalformedResponseError, match="0 embeddings for 2 texts"):
        await model_on(openai_server).embed(["a", "b"])


async def test_errors_have_the_chat_models_types(openai_server: ScriptedOpenAiServer) -> None:
    openai_server.add(
        JsonReply({"error": {"message": "slow down"}}, 429, {"Retry-After": "3"}),
        JsonReply({"error": {"message": "bad key"}}, 401),
    )
    model = model_on(openai_server, api_key="sk-x")
    with pytest.raises(RateLimitedError) as limited:
        await model.embed(["a"])
    assert (limited.value.retry_after, limited.value.message) == (3.0, "slow down")
    with pytest.raises(AuthenticationError, match="bad key"):
        await model.embed(["a"])
    assert "sk-x" not in repr(model)
