"""The advisor chain: onion order, ties, re-entry, short-circuit, context, exhaustion, errors."""

from __future__ import annotations

import threading

import pytest

from advisors_app.core import (
    HIGHEST_PRECEDENCE,
    LOWEST_PRECEDENCE,
    AdvisorStateError,
    BaseAdvisor,
    CallAdvisor,
    ChatClientRequest,
    ChatClientResponse,
    ChatModelCallAdvisor,
    ChatModelStreamAdvisor,
    ChatResponse,
    DefaultAroundAdvisorChain,
    Prompt,
    RecordingAdvisor,
    ScriptedChatModel,
    StreamAdvisor,
)


def chain_of(*advisors, model=None):
    model = model or ScriptedChatModel(["ok"] * 10)
    return DefaultAroundAdvisorChain(
        [*advisors, ChatModelCallAdvisor(model), ChatModelStreamAdvisor(model)]
    )


def request(text="hi", **context):
    return ChatClientRequest(Prompt(text), context)


async def drain(stream):
    return [chunk async for chunk in stream]


async def test_onion_order_call_and_stream():
    log: list[str] = []
    advisors = [
        RecordingAdvisor("b", 2, log),
        RecordingAdvisor("a", 1, log),
        RecordingAdvisor("c", 3, log),
    ]
    chain = chain_of(*advisors)
    await chain.next_call(request())
    assert log == ["a:before", "b:before", "c:before", "c:after", "b:after", "a:after"]
    log.clear()
    await drain(chain.next_stream(request()))
    assert log == ["a:before", "b:before", "c:before", "c:after", "b:after", "a:after"]


async def test_equal_orders_keep_registration_order_in_chain_and_copies():
    log: list[str] = []
    first, second, third = (RecordingAdvisor(n, 0, log) for n in "xyz")
    outer = RecordingAdvisor("outer", -1, log)
    chain = chain_of(first, second, third, outer)
    assert [a.name for a in chain.call_advisors] == ["outer", "x", "y", "z", "call"]
    copied = chain.copy(outer)
    assert [a.name for a in copied.call_advisors] == ["x", "y", "z", "call"]
    await copied.next_call(request())
    assert log == ["x:before", "y:before", "z:before", "z:after", "y:after", "x:after"]


async def test_an_advisor_may_set_its_order_as_an_attribute_class_or_instance():
    class Ranked(BaseAdvisor):
        def __init__(self, label: str, order: int) -> None:
            self.label = label
            self.order = order  # what a project's advisor naturally writes

    class Outermost(BaseAdvisor):
        order = HIGHEST_PRECEDENCE

    chain = chain_of(Ranked("late", 5), Ranked("early", -5), Outermost())
    assert [a.name for a in chain.call_advisors] == ["Outermost", "Ranked", "Ranked", "call"]
    assert [getattr(a, "label", "") for a in chain.call_advisors[1:3]] == ["early", "late"]
    assert BaseAdvisor().order == 0 and chain.call_advisors[-1].order == LOWEST_PRECEDENCE


async def test_lowest_precedence_advisor_still_runs_before_the_model():
    log: list[str] = []
    chain = chain_of(RecordingAdvisor("last", LOWEST_PRECEDENCE, log))
    assert [a.name for a in chain.call_advisors] == ["last", "call"]
    assert [a.name for a in chain.stream_advisors] == ["last", "stream"]
    await chain.next_call(request())
    assert log == ["last:before", "last:after"]


async def test_calling_next_call_twice_from_one_position_runs_downstream_twice():
    log: list[str] = []
    model = ScriptedChatModel(["one", "two"])

    class Twice(CallAdvisor):
        async def advise_call(self, req, chain):
            await chain.next_call(req)
            return await chain.next_call(req)

    chain = chain_of(Twice(), RecordingAdvisor("inner", 5, log), model=model)
    response = await chain.next_call(request())
    assert response.chat_response.text == "two"
    assert log == ["inner:before", "inner:after"] * 2
    assert len(model.prompts) == 2


async def test_short_circuit_call_and_stream():
    model = ScriptedChatModel([])

    class Block(BaseAdvisor):
        async def advise_call(self, req, chain):
            return ChatClientResponse(ChatResponse.of_text("blocked"), req.context)

        async def advise_stream(self, req, chain):
            yield ChatClientResponse(ChatResponse.of_text("blocked"), req.context)

    chain = chain_of(Block(), model=model)
    assert (await chain.next_call(request())).chat_response.text == "blocked"
    chunks = await drain(chain.next_stream(request()))
    assert [c.chat_response.text for c in chunks] == ["blocked"]
    assert model.prompts == []


class ContextWriter(BaseAdvisor):
    order = 1

    def before(self, req, chain):
        return req.mutate(context={"seen_by_inner": True, "nothing": None})

    def after(self, resp, chain):
        return resp.mutate(context={"from_after": resp.context["inner_after"]})


class ContextReader(BaseAdvisor):
    order = 2

    def before(self, req, chain):
        assert req.context["seen_by_inner"] is True
        assert req.context["nothing"] is None
        return req

    def after(self, resp, chain):
        return resp.mutate(context={"inner_after": "value"})


async def test_context_propagates_both_ways_with_none_values():
    chain = chain_of(ContextReader(), ContextWriter())
    response = await chain.next_call(request(param=None))
    assert response.context["from_after"] == "value"
    assert response.context["param"] is None
    assert "nothing" in response.context


async def test_context_propagates_in_streams_and_after_reaches_consumer_as_trailing_chunk():
    chain = chain_of(ContextReader(), ContextWriter())
    chunks = await drain(chain.next_stream(request()))
    assert chunks[0].chat_response.text == "ok"
    assert "from_after" not in chunks[0].context
    assert chunks[-1].context["from_after"] == "value"
    assert chunks[-1].chat_response is None


async def test_exhausted_chain_raises_springs_messages():
    empty = DefaultAroundAdvisorChain([])
    with pytest.raises(AdvisorStateError, match="No CallAdvisors available to execute"):
        await empty.next_call(request())
    stream = empty.next_stream(request())  # lazy: nothing raised at assembly
    with pytest.raises(AdvisorStateError, match="No StreamAdvisors available to execute"):
        await drain(stream)


async def test_copy_validation_messages():
    chain = chain_of()
    with pytest.raises(ValueError, match="The after advisor must not be null"):
        chain.copy(None)
    with pytest.raises(
        ValueError, match="The specified advisor is not part of the chain: stranger"
    ):
        chain.copy(RecordingAdvisor("stranger"))


async def test_null_advisors_are_rejected():
    with pytest.raises(ValueError, match="the advisors must not contain null elements"):
        DefaultAroundAdvisorChain([None])
    with pytest.raises(ValueError, match="the chatClientRequest cannot be null"):
        await chain_of().next_call(None)


class Boom(Exception):
    pass


async def test_errors_keep_their_type_in_call_and_stream():
    log: list[str] = []
    model = ScriptedChatModel([Boom("call"), Boom("stream")])
    chain = chain_of(RecordingAdvisor("a", 1, log), model=model)
    with pytest.raises(Boom, match="call"):
        await chain.next_call(request())
    stream = chain.next_stream(request())
    with pytest.raises(Boom, match="stream"):
        await drain(stream)
    assert log == ["a:before", "a:before"]  # no after on failure


async def test_mid_stream_error_surfaces_while_iterating_after_earlier_chunks():
    model = ScriptedChatModel([["Hel", "lo", Boom("cut")]])
    chain = chain_of(RecordingAdvisor("a", 1), model=model)
    received = []
    with pytest.raises(Boom):
        async for chunk in chain.next_stream(request()):
            received.append(chunk.chat_response.text)
    assert received == ["Hel", "lo"]
    assert model.events[-1] == "error"


async def test_async_hooks_and_blocking_hooks():
    loop_thread = threading.get_ident()
    seen = {}

    class AsyncHooks(BaseAdvisor):
        async def before(self, req, chain):
            seen["async_before"] = threading.get_ident()
            return req

    class Pure(BaseAdvisor):
        def before(self, req, chain):
            seen["pure"] = threading.get_ident()
            return req

    class Blocking(BaseAdvisor):
        blocking = True

        def before(self, req, chain):
            seen["blocking"] = threading.get_ident()
            return req

    await chain_of(AsyncHooks(), Pure(), Blocking()).next_call(request())
    assert seen["async_before"] == loop_thread
    assert seen["pure"] == loop_thread
    assert seen["blocking"] != loop_thread


async def test_hook_returning_none_is_a_clear_error():
    class Forgetful(BaseAdvisor):
        def before(self, req, chain):
            return None

    with pytest.raises(ValueError, match=r"Forgetful.before\(\) returned None"):
        await chain_of(Forgetful()).next_call(request())


def test_advisor_defaults_without_super_init():
    class Plain(BaseAdvisor):
        def __init__(self):
            pass

    class Named(StreamAdvisor):
        name = "custom"
        order = HIGHEST_PRECEDENCE

    assert Plain().name == "Plain" and Plain().order == 0
    assert Named().name == "custom" and Named().order == HIGHEST_PRECEDENCE
