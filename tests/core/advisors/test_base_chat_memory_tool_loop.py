"""B09, memory side: a memory advisor wrapping a tool loop runs once per user turn.

``MiniToolLoop`` is a minimal ``ToolAdvisor`` at the tool-calling order (``HIGHEST + 300``): when
the model asks for a tool it appends the call and a canned result and asks again, through
``chain.copy(self)`` as Spring AI's loop does. The real ``ToolCallingAdvisor`` lives in
``core/advisors/tool_calling.py``.
"""

from __future__ import annotations

from contextlib import aclosing

import pytest

from advisors_app.core import (
    DEFAULT_TOOL_CALLING_ORDER,
    CallAdvisor,
    ChatClient,
    ChatClientResponseAccumulator,
    ChatResponse,
    Generation,
    RecordingAdvisor,
    ScriptedChatModel,
    StreamAdvisor,
    ToolAdvisor,
)
from advisors_app.core.advisors import MessageChatMemoryAdvisor, PromptChatMemoryAdvisor
from advisors_app.core.memory import MessageWindowChatMemory
from advisors_app.core.streams import closing_stream
from tests.core.advisors.memory_helpers import turn
from tests.core.memory.messages import A, T, U, call


class MiniToolLoop(CallAdvisor, StreamAdvisor, ToolAdvisor):
    order = DEFAULT_TOOL_CALLING_ORDER

    def _next(self, request, response):
        output = response.chat_response.result.output
        messages = (*request.prompt.instructions, output, T(*(c.id for c in output.tool_calls)))
        return request.mutate(prompt=request.prompt.mutate(messages=messages))

    async def advise_call(self, request, chain):
        while True:
            response = await chain.copy(self).next_call(request)
            if not response.chat_response.has_tool_calls():
                return response
            request = self._next(request, response)

    async def advise_stream(self, request, chain):
        while True:
            accumulator = ChatClientResponseAccumulator()
            async with closing_stream(chain.copy(self).next_stream(request)) as chunks:
                async for chunk in chunks:
                    accumulator.add(chunk)
                    if not chunk.chat_response.has_tool_calls():
                        yield chunk
            response = accumulator.result()
            if not response.chat_response.has_tool_calls():
                return
            request = self._next(request, response)


@pytest.mark.parametrize("advisor_class", [MessageChatMemoryAdvisor, PromptChatMemoryAdvisor])
@pytest.mark.parametrize("mode", ["call", "stream"])
async def test_b09_memory_wraps_the_loop_and_stores_only_the_user_turn(advisor_class, mode):
    memory = MessageWindowChatMemory()
    memory.add("c1", [U("Hi"), A("Hello")])
    log: list[str] = []
    model = ScriptedChatModel([ChatResponse((Generation(call("t1")),)), "It is 5C in Oslo"])
    client = ChatClient(
        model,
        default_advisors=[
            RecordingAdvisor("inside", DEFAULT_TOOL_CALLING_ORDER + 1, log),
            MiniToolLoop(),
            advisor_class(memory),
            RecordingAdvisor("outside", DEFAULT_TOOL_CALLING_ORDER - 200, log),
        ],
    )
    assert await turn(client, "Weather in Oslo?", mode) == "It is 5C in Oslo"
    # The loop ran the inner advisor twice, the memory advisor (between the two recorders) once.
    assert log == ["outside:before", *["inside:before", "inside:after"] * 2, "outside:after"]
    second = model.prompts[1].instructions
    assert [m for m in second if m == U("Weather in Oslo?")] == [U("Weather in Oslo?")]
    assert second[-3:] == (U("Weather in Oslo?"), call("t1"), T("t1"))
    assert memory.get("c1") == [U("Hi"), A("Hello"), U("Weather in Oslo?"), A("It is 5C in Oslo")]


async def test_b09_streamed_tool_turn_interrupted_stores_no_dangling_call():
    memory = MessageWindowChatMemory()
    model = ScriptedChatModel(
        [ChatResponse((Generation(call("t1")),)), ["It is", " 5C", " in Oslo"]], chunk_delay=0.01
    )
    client = ChatClient(model, default_advisors=[MiniToolLoop(), MessageChatMemoryAdvisor(memory)])
    spec = client.prompt("Weather in Oslo?").advisor_param("chat_memory_conversation_id", "c1")
    async with aclosing(spec.stream().content()) as deltas:
        assert await anext(deltas) == "It is"
    user, reply = memory.get("c1")
    assert (user, reply) == (U("Weather in Oslo?"), A("It is"))
    assert reply.tool_calls == ()
    assert reply.metadata["finish_reason"] == "cancelled"
