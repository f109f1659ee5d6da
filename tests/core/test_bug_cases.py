"""Scenarios B17, B18, B28 and B32 from shared/cases/bug-cases.md at the engine level."""

from __future__ import annotations

import asyncio
from contextlib import aclosing

import pytest

from advisors_app.core import (
    DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER,
    BadRequestError,
    BaseAdvisor,
    ChatClient,
    RateLimitedError,
    RecordingAdvisor,
    ScriptedChatModel,
    StreamAdvisor,
)
from advisors_app.core.streams import closing_stream


def test_b17_chain_state_does_not_leak_across_calls():
    log: list[str] = []
    l1 = RecordingAdvisor("L1", 0, log)
    memory = RecordingAdvisor("Memory", DEFAULT_CHAT_MEMORY_PRECEDENCE_ORDER, log)
    l2 = RecordingAdvisor("L2", 1000, log)
    model = ScriptedChatModel(["ok"], repeat=True)
    client = ChatClient(model, default_advisors=[l1, memory, l2])
    for _ in range(3):
        log.clear()
        assert client.prompt("q").call().content() == "ok"
        assert log == [
            "Memory:before",
            "L1:before",
            "L2:before",
            "L2:after",
            "L1:after",
            "Memory:after",
        ]
    assert len(client.default_advisors) == 3
    assert len(model.prompts) == 3


async def test_b17_reentry_runs_only_downstream_advisors_each_time_complete():
    log: list[str] = []

    class Loop(BaseAdvisor):
        order = 10

        async def advise_call(self, request, chain):
            await chain.copy(self).next_call(request)
            return await chain.copy(self).next_call(request)

    model = ScriptedChatModel(["ok"], repeat=True)
    client = ChatClient(
        model,
        default_advisors=[
            RecordingAdvisor("outer", 0, log),
            Loop(),
            RecordingAdvisor("inner", 20, log),
        ],
    )
    await client.prompt("q").acall()
    assert log == ["outer:before"] + ["inner:before", "inner:after"] * 2 + ["outer:after"]
    assert len(model.prompts) == 2


async def test_b17_concurrent_calls_on_one_client_do_not_interfere():
    model = ScriptedChatModel([lambda p: f"echo {p.user_message.text}"], repeat=True)
    client = ChatClient(model, default_advisors=[RecordingAdvisor("r", 0, [])])
    answers = await asyncio.gather(*(client.prompt(f"q{i}").call().acontent() for i in range(20)))
    assert answers == [f"echo q{i}" for i in range(20)]


class CompletionProbe(StreamAdvisor):
    """Counts how the downstream stream ended: completed or cancelled (test-local counters)."""

    def __init__(self):
        self.complete = 0
        self.cancel = 0

    async def advise_stream(self, request, chain):
        try:
            async with closing_stream(chain.next_stream(request)) as chunks:
                async for chunk in chunks:
                    yield chunk
        except (GeneratorExit, asyncio.CancelledError):
            self.cancel += 1
            raise
        self.complete += 1


async def test_b28_normal_completion_is_never_reported_as_cancelled():
    probe = CompletionProbe()
    model = ScriptedChatModel([["a", "b", "c"], ["1", "2", "3", "4"]])
    client = ChatClient(model, default_advisors=[probe])
    assert [t async for t in client.prompt("q").stream().content()] == ["a", "b", "c"]
    assert (probe.complete, probe.cancel) == (1, 0)
    assert model.events == ["stream", "complete"]

    async with aclosing(client.prompt("q").stream().content()) as texts:
        received = []
        async for text in texts:
            received.append(text)
            if len(received) == 2:
                break
    assert (probe.complete, probe.cancel) == (1, 1)
    assert model.events[-2:] == ["stream", "cancel"]


@pytest.mark.parametrize("chunks_before", [0, 3])
async def test_b32_provider_errors_keep_type_and_body_in_call_and_stream(chunks_before):
    body = {"error": {"message": "messages.0: unknown field 'foo'"}}
    bad = BadRequestError("messages.0: unknown field 'foo'", status=400, body=body)
    limited = RateLimitedError("slow down", retry_after=2)
    script = [bad, [*["x"] * chunks_before, bad], limited, [*["x"] * chunks_before, limited]]
    client = ChatClient(
        ScriptedChatModel(script), default_advisors=[BaseAdvisor(), RecordingAdvisor("r")]
    )

    with pytest.raises(BadRequestError) as in_call:
        await client.prompt("q").acall()
    with pytest.raises(BadRequestError) as in_stream:
        async for _ in client.prompt("q").stream().content():
            pass
    for caught in (in_call.value, in_stream.value):
        assert caught.status == 400 and caught.body == body
        assert caught.message == "messages.0: unknown field 'foo'"

    with pytest.raises(RateLimitedError) as limited_call:
        await client.prompt("q").acall()
    stream = client.prompt("q").stream().content()  # nothing raised at assembly
    with pytest.raises(RateLimitedError) as limited_stream:
        async for _ in stream:
            pass
    assert limited_call.value.retry_after == limited_stream.value.retry_after == 2
    assert limited_call.value.status == 429
