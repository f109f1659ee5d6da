"""SemanticCacheAdvisor: hit/miss, scope (owner, system, options, tools, history), TTL, refusals."""

from __future__ import annotations

import pytest

from advisors_app.core import (
    DEFAULT_TOOL_CALLING_ORDER,
    OWNER,
    AssistantMessage,
    ChatClient,
    ChatClientResponseAccumulator,
    ChatOptions,
    ChatResponse,
    MemoryAdvisor,
    ScriptedChatModel,
    Usage,
    UserMessage,
)
from advisors_app.core.advisors import SemanticCacheAdvisor
from advisors_app.core.advisors.semantic_cache import CACHE_HIT, CACHE_QUERY, CACHE_SIMILARITY
from advisors_app.core.cache import InMemorySemanticCache
from advisors_app.core.messages import Media
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.core.testing import tool_call_response
from advisors_app.core.tools import tool
from tests.core.cache_contract import Clock

MODES = ["call", "stream"]
EMBEDDINGS = MiniLmEmbeddingModel()


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: found"


@tool
def other_tool(term: str) -> str:
    """Another tool."""
    return term


def setup(*answers, clock=None, **advisor_kwargs):
    cache = InMemorySemanticCache(
        EMBEDDINGS, ttl=advisor_kwargs.pop("ttl", None), clock=clock or Clock()
    )
    model = ScriptedChatModel(list(answers))
    advisor = SemanticCacheAdvisor(cache, **advisor_kwargs)
    return ChatClient(model, default_advisors=[advisor]), model


async def ask(client, text, mode, owner="alice", system=None, **spec_kwargs):
    spec = client.prompt(text)
    if owner is not None:
        spec = spec.advisor_param(OWNER, owner)
    if system is not None:
        spec = spec.system(system)
    if "options" in spec_kwargs:
        spec = spec.options(spec_kwargs["options"])
    if "tools" in spec_kwargs:
        spec = spec.tools(*spec_kwargs["tools"])
    if "messages" in spec_kwargs:
        spec = spec.messages(*spec_kwargs["messages"])
    if mode == "call":
        return (await spec.acall()).chat_response(), None
    chunks = [c async for c in spec.stream().chat_client_responses()]
    accumulator = ChatClientResponseAccumulator()
    for chunk in chunks:
        accumulator.add(chunk)
    return accumulator.result().chat_response, chunks


@pytest.mark.parametrize("mode", MODES)
async def test_a_similar_question_is_answered_from_the_cache(mode):
    client, model = setup(ChatResponse.of_text("Paris.", usage=Usage(20, 3)))
    first, _ = await ask(client, "What is the capital of France?", mode)
    assert first.text == "Paris." and not first.metadata.get(CACHE_HIT)
    second, chunks = await ask(client, "What's the capital city of France?", mode)
    assert second.text == "Paris."
    assert second.metadata[CACHE_HIT] is True
    assert 0.8 <= second.metadata[CACHE_SIMILARITY] <= 1.0
    assert second.metadata[CACHE_QUERY] == "What is the capital of France?"
    assert len(model.prompts) == 1  # the model was not called again
    if chunks is None:
        assert second.metadata.usage == Usage(0, 0, 0)
    else:
        # One chunk carrying zero usage (stream aggregation reads an all-zero usage as unknown).
        assert len(chunks) == 1
        assert chunks[0].chat_response.metadata.usage == Usage(0, 0, 0)


@pytest.mark.parametrize("mode", MODES)
async def test_an_unrelated_question_misses(mode):
    client, model = setup("Paris.", "Sunny.")
    await ask(client, "What is the capital of France?", mode)
    answer, _ = await ask(client, "Will it rain in Tokyo tomorrow?", mode)
    assert answer.text == "Sunny." and len(model.prompts) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_one_owners_answer_is_never_served_to_another(mode):
    client, _ = setup("Alice's answer.", "Bob's answer.")
    await ask(client, "What is my account balance?", mode, owner="alice")
    answer, _ = await ask(client, "What is my account balance?", mode, owner="bob")
    assert answer.text == "Bob's answer."
    again, _ = await ask(client, "What is my account balance?", mode, owner="alice")
    assert again.text == "Alice's answer." and again.metadata[CACHE_HIT]


@pytest.mark.parametrize("mode", MODES)
async def test_without_an_owner_the_cache_is_bypassed_unless_shared(mode):
    client, _ = setup("one", "two")
    await ask(client, "What is the capital of France?", mode, owner=None)
    answer, _ = await ask(client, "What is the capital of France?", mode, owner=None)
    assert answer.text == "two"
    client, _ = setup("shared", allow_shared=True)
    await ask(client, "What is the capital of France?", mode, owner=None)
    answer, _ = await ask(client, "What is the capital of France?", mode, owner=None)
    assert answer.text == "shared" and answer.metadata[CACHE_HIT]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ({"system": "Answer in French."}, {"system": "Answer in English."}),
        ({}, {"system": "Answer in English."}),  # no system prompt never sees one (5.7.50)
        ({"options": ChatOptions(model="m1")}, {"options": ChatOptions(model="m2")}),
        ({"options": ChatOptions(temperature=0)}, {"options": ChatOptions(temperature=1)}),
        ({"tools": [lookup]}, {"tools": [other_tool]}),
        ({}, {"messages": [UserMessage("Earlier"), AssistantMessage("Reply")]}),
    ],
    ids=["system", "system-vs-none", "model", "options", "tools", "history"],
)
@pytest.mark.parametrize("mode", MODES)
async def test_scope_separates_requests_that_differ(mode, first, second):
    client, model = setup("first answer", "second answer")
    await ask(client, "What is the capital of France?", mode, **first)
    answer, _ = await ask(client, "What is the capital of France?", mode, **second)
    assert answer.text == "second answer"
    assert len(model.prompts) == 2


@pytest.mark.parametrize("mode", MODES)
async def test_entries_expire_after_the_ttl(mode):
    clock = Clock()
    client, _ = setup("old", "new", clock=clock, ttl=300)
    await ask(client, "What is the capital of France?", mode)
    clock.now += 299
    assert (await ask(client, "What is the capital of France?", mode))[0].text == "old"
    clock.now += 2
    assert (await ask(client, "What is the capital of France?", mode))[0].text == "new"


@pytest.mark.parametrize("finish_reason", ["LENGTH", "CONTENT_FILTER", "content_filter"])
@pytest.mark.parametrize("mode", MODES)
async def test_truncated_and_refused_answers_are_not_cached(mode, finish_reason):
    client, _ = setup(
        ChatResponse.of_text("Par", finish_reason=finish_reason), "Paris, the full answer."
    )
    await ask(client, "What is the capital of France?", mode)
    answer, _ = await ask(client, "What is the capital of France?", mode)
    assert answer.text == "Paris, the full answer."


@pytest.mark.parametrize("mode", MODES)
async def test_turns_that_ran_tools_are_not_cached_unless_asked(mode):
    script = [tool_call_response(("lookup", {"term": "x"})), "x is found", "fresh"]
    client, model = setup(*script)
    await ask(client, "Look up x", mode, tools=[lookup])
    answer, _ = await ask(client, "Look up x", mode, tools=[lookup])
    assert answer.text == "fresh" and len(model.prompts) == 3

    client, model = setup(*script, cache_tool_turns=True)
    await ask(client, "Look up x", mode, tools=[lookup])
    answer, _ = await ask(client, "Look up x", mode, tools=[lookup])
    assert answer.text == "x is found" and answer.metadata[CACHE_HIT]


@pytest.mark.parametrize("mode", MODES)
async def test_attachments_and_empty_user_text_bypass_the_cache(mode):
    client, model = setup("one", "two")
    picture = UserMessage("What is in this picture?", media=(Media("image/png", b"x"),))
    for _ in range(2):
        spec = client.prompt().messages(picture).advisor_param(OWNER, "alice")
        if mode == "call":
            await spec.acall()
        else:
            [c async for c in spec.stream().content()]
    assert len(model.prompts) == 2


class BrokenCache:
    async def get(self, query, scope):
        raise ConnectionError("cache down")

    async def set(self, query, response, scope):
        raise ConnectionError("cache down")

    async def clear(self, scope=None):
        return None


@pytest.mark.parametrize("mode", MODES)
async def test_a_failing_cache_is_a_miss_unless_fail_open_is_off(mode):
    model = ScriptedChatModel(["still answered", "x"])
    client = ChatClient(model, default_advisors=[SemanticCacheAdvisor(BrokenCache())])
    answer, _ = await ask(client, "hello there", mode)
    assert answer.text == "still answered"
    strict = ChatClient(
        model, default_advisors=[SemanticCacheAdvisor(BrokenCache(), fail_open=False)]
    )
    with pytest.raises(ConnectionError):
        await ask(strict, "hello there", mode)


async def test_a_stream_closed_early_is_not_cached():
    client, _ = setup(["Par", "is."], "Paris, again.")
    spec = client.prompt("What is the capital of France?").advisor_param(OWNER, "alice")
    stream = spec.stream().content()
    assert await anext(stream) == "Par"
    await stream.aclose()
    answer, _ = await ask(client, "What is the capital of France?", "call")
    assert answer.text == "Paris, again."


async def test_it_is_not_a_memory_advisor_and_keeps_tool_history_on():
    cache = InMemorySemanticCache(EMBEDDINGS)
    advisor = SemanticCacheAdvisor(cache, order=DEFAULT_TOOL_CALLING_ORDER + 100)
    assert not isinstance(advisor, MemoryAdvisor)
    model = ScriptedChatModel([tool_call_response(("lookup", {"term": "x"})), "done"])
    client = ChatClient(model, default_advisors=[advisor])
    await ask(client, "Look up x", "call", tools=[lookup])
    assert len(model.prompts[1].instructions) == 3  # full history: not switched off (5.7.49)


def test_construction():
    with pytest.raises(ValueError, match="Cache must not be null"):
        SemanticCacheAdvisor(None)
    advisor = SemanticCacheAdvisor(InMemorySemanticCache(EMBEDDINGS))
    assert advisor.order == DEFAULT_TOOL_CALLING_ORDER - 50
    assert advisor.name == "SemanticCacheAdvisor"
