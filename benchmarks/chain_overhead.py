"""Chain overhead per call and per streamed chunk: our advisor chain vs LangChain 1.x middleware.

One logical chain on both sides (ours / LangChain), around a zero-latency fake model that
answers every turn with one tool call, then (after the tool ran) a JSON answer:

- log each model call: ``SimpleLoggerAdvisor`` (DEBUG off) / ``awrap_model_call``, the same;
- refuse listed words: ``SafeGuardAdvisor`` (outermost) / ``abefore_agent`` + jump to end;
- conversation memory, 20 messages: ``MessageChatMemoryAdvisor`` on ``MessageWindowChatMemory``
  over ``InMemoryChatMemoryRepository`` / an ``InMemorySaver`` checkpointer per ``thread_id``
  and an ``abefore_model`` trim to 20 messages; a new conversation every 10 turns on both sides;
- pass-through: a ``BaseAdvisor`` overriding both hooks / ``awrap_model_call`` → handler;
- tool loop, one round: ``ToolCallingAdvisor`` + ``@tool`` / the agent's own loop + ``@tool``;
- validate the JSON answer, retry on error: ``StructuredOutputValidationAdvisor`` /
  ``aafter_model`` + jump back to the model.

Both validate with the same ``jsonschema`` validator and schema; the fake models are native
``async`` on both sides (``ScriptedChatModel``; a ``GenericFakeChatModel`` subclass with
``bind_tools`` and ``_agenerate``/``_astream``). "Direct" is the bare model called twice (the
two rounds of a turn), so *overhead = chain − direct*. LangChain is also measured without the
checkpointer (no memory across calls: less work than ours). Streams: 200 answer chunks; time
to first chunk counts from the request to the first answer text. Our chain holds a streamed
answer until the validation advisor has checked it, so it is also measured without that
advisor (5 advisors), where text streams as it arrives.

Micro rows: 6 pass-through advisors (hooks overridden, and default hooks) around the model,
per call and per chunk, for the per-advisor cost alone.

Run: ``python benchmarks/chain_overhead.py`` (about a minute; LangChain from
``requirements-bench.txt``, skipped with a note when it is not installed). Medians of several
repetitions in one process, interleaved across the cases (A B C, A B C, ...) so that load from
other work on the machine falls on ours and the peer alike.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LANGSMITH_TRACING", "false")

from advisors_app.core import (
    CONVERSATION_ID,
    HIGHEST_PRECEDENCE,
    AssistantMessage,
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatModelCallAdvisor,
    ChatModelStreamAdvisor,
    ChatResponse,
    DefaultAroundAdvisorChain,
    Generation,
    Prompt,
    ScriptedChatModel,
    ToolCall,
    ToolResponseMessage,
)
from advisors_app.core.advisors import (
    MessageChatMemoryAdvisor,
    SafeGuardAdvisor,
    SimpleLoggerAdvisor,
    StructuredOutputValidationAdvisor,
    ToolCallingAdvisor,
)
from advisors_app.core.memory import (
    InMemoryChatMemoryRepository,
    MessageWindowChatMemory,
)
from advisors_app.core.tools import tool
from benchmarks._common import header, machine, write_json
from benchmarks._langchain_chain import langchain_side

ADVISORS = 6
WINDOW = 20
QUESTION = "What is the weather in Paris?"
WORDS = ["keylogger", "ransomware", "card dump"]
SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}, "city": {"type": "string"}},
    "required": ["answer", "city"],
    "additionalProperties": False,
}
RETRY_PREFIX = "Output JSON validation failed because of: "


def answer_chunks(n: int) -> list[str]:
    """``n`` chunks whose concatenation is a valid answer for ``SCHEMA``."""
    words = [f"w{i} " for i in range(max(n - 2, 0))]
    return ['{"answer": "', *words, '", "city": "Paris"}']


def conversation(turn: int) -> str:
    """A new conversation every 10 turns: history to carry, yet bounded per conversation.

    LangGraph's ``InMemorySaver`` keeps every checkpoint of a thread and finds the latest with
    ``max()`` over them, so one endless thread would slow the peer down as the run goes on.
    """
    return f"bench-{turn // 10}"


def weather(city: str) -> str:
    """Current weather of a city."""
    return f"sunny in {city}"


# --- ours -------------------------------------------------------------------------------------


class PassThrough(BaseAdvisor):
    """Overrides both hooks (so streams aggregate for ``after``) and changes nothing."""

    def before(self, request, chain):
        return request

    def after(self, response, chain):
        return response


class Identity(BaseAdvisor):
    """Keeps the default hooks: the chain skips before/after and aggregation entirely."""


def tool_round() -> ChatResponse:
    call = ToolCall("call_1", "weather", json.dumps({"city": "Paris"}))
    return ChatResponse((Generation(AssistantMessage("", tool_calls=(call,))),))


def our_client(model: ScriptedChatModel, *, validation: bool = True) -> ChatClient:
    memory = MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=WINDOW)
    advisors: list[Any] = [
        SimpleLoggerAdvisor(),
        SafeGuardAdvisor(WORDS, order=HIGHEST_PRECEDENCE + 100),
        MessageChatMemoryAdvisor(memory),
        PassThrough(),
        ToolCallingAdvisor(),
    ]
    if validation:
        advisors.append(StructuredOutputValidationAdvisor(output_json_schema=SCHEMA))
    return ChatClient(model, default_advisors=advisors, default_tools=[tool(weather)])


# --- measuring --------------------------------------------------------------------------------


async def calls_us(
    cases: dict[str, Callable[[], Awaitable[Any]]], seconds: float, repeats: int
) -> dict[str, float]:
    """Median µs per ``await run()`` of each case; a repetition lasts about ``seconds``.

    Repetitions interleave the cases (A B C, A B C, ...), so load from other work on the
    machine falls on every case alike and the ratios stay fair.
    """
    loops = {}
    for name, run in cases.items():
        for _ in range(3):
            await run()
        start, n = time.perf_counter(), 0
        while time.perf_counter() - start < seconds / 4 or n < 3:
            await run()
            n += 1
        loops[name] = max(3, n * 4)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, run in cases.items():
            start = time.perf_counter()
            for _ in range(loops[name]):
                await run()
            samples[name].append((time.perf_counter() - start) / loops[name] * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


StreamCase = tuple[Callable[[], AsyncIterator[Any]], Callable[[Any], bool]]


async def streams_us(
    cases: dict[str, StreamCase], streams: int, repeats: int
) -> dict[str, tuple[float, float]]:
    """Per case: median (µs per whole stream, µs to the first item with text), interleaved.

    A case is ``(stream, has_text)``: ``stream()`` opens one stream, ``has_text(item)`` tells
    the first item that carries answer text. Each repetition runs ``streams`` streams per case.
    """

    async def once(case: StreamCase) -> tuple[float, float]:
        stream, has_text = case
        start = time.perf_counter()
        first = None
        async for item in stream():
            if first is None and has_text(item):
                first = time.perf_counter()
        end = time.perf_counter()
        return (end - start) * 1e6, ((first or end) - start) * 1e6

    for case in cases.values():
        for _ in range(2):
            await once(case)
    totals: dict[str, list[float]] = {name: [] for name in cases}
    firsts: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats):
        for name, case in cases.items():
            runs = [await once(case) for _ in range(streams)]
            totals[name].append(statistics.mean(r[0] for r in runs))
            firsts[name].append(statistics.mean(r[1] for r in runs))
    return {
        name: (statistics.median(totals[name]), statistics.median(firsts[name])) for name in cases
    }


async def check_ours() -> None:
    """Both sides must do the work they claim: one tool round, a valid answer, memory kept."""
    model = ScriptedChatModel([tool_round(), "".join(answer_chunks(4))], repeat=True)
    client = our_client(model)
    params = {CONVERSATION_ID: "check"}
    for _ in range(2):
        text = await client.prompt(QUESTION).advisor_params(params).call().acontent()
        assert json.loads(text)["city"] == "Paris", text
    assert len(model.prompts) == 4, "two model rounds per turn"
    responses = [
        r.response_data
        for m in model.prompts[1].instructions
        if isinstance(m, ToolResponseMessage)
        for r in m.responses
    ]
    assert responses == ["sunny in Paris"], "the tool ran"
    assert len(model.prompts[2].instructions) == 3, "the second turn sees the first (memory)"


async def check_langchain(lc: dict[str, Any]) -> None:
    agent = lc["agent"]("".join(answer_chunks(4)))
    config = {"configurable": {"thread_id": "check"}}
    for _ in range(2):
        state = await agent.ainvoke({"messages": [lc["HumanMessage"](QUESTION)]}, config)
    names = [type(m).__name__ for m in state["messages"]]
    assert names[-4:] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"], names
    assert len(names) == 8, "the second turn sees the first (checkpointer)"
    assert json.loads(state["messages"][-1].text)["city"] == "Paris"


async def measure(seconds: float, repeats: int, chunks: int, streams: int) -> dict[str, Any]:
    await check_ours()
    lc = langchain_side(
        window=WINDOW, words=WORDS, schema=SCHEMA, retry_prefix=RETRY_PREFIX, weather=weather
    )
    if lc is not None:
        await check_langchain(lc)
    turns = itertools.count()

    def params() -> dict[str, str]:
        return {CONVERSATION_ID: conversation(next(turns))}

    def config() -> dict[str, Any]:
        return {"configurable": {"thread_id": conversation(next(turns))}}

    answer = "".join(answer_chunks(chunks))
    prompt = Prompt(QUESTION)
    results: dict[str, Any] = {"langchain_versions": lc["versions"] if lc else None}

    # Per call: the bare model (two rounds) and the chain, each side.
    model = ScriptedChatModel([tool_round(), answer], repeat=True)
    client = our_client(model)

    async def direct() -> None:
        await model.call(prompt)
        await model.call(prompt)

    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "ours_direct_us": direct,
        "ours_chain_us": lambda: client.prompt(QUESTION).advisor_params(params()).call().acontent(),
    }
    messages: list[Any] = []
    if lc is not None:
        lc_model = lc["model"](answer)
        messages = [lc["HumanMessage"](QUESTION)]
        agent = lc["agent"](answer)
        agent_stateless = lc["agent"](answer, checkpointer=False)

        async def lc_direct() -> None:
            await lc_model.ainvoke(messages)
            await lc_model.ainvoke(messages)

        cases["langchain_direct_us"] = lc_direct
        cases["langchain_agent_us"] = lambda: agent.ainvoke({"messages": messages}, config())
        cases["langchain_agent_no_checkpointer_us"] = lambda: agent_stateless.ainvoke(
            {"messages": messages}
        )
    call: dict[str, Any] = await calls_us(cases, seconds, repeats)
    call["ours_overhead_us"] = call["ours_chain_us"] - call["ours_direct_us"]
    if lc is not None:
        call["langchain_overhead_us"] = call["langchain_agent_us"] - call["langchain_direct_us"]
        call["langchain_overhead_no_checkpointer_us"] = (
            call["langchain_agent_no_checkpointer_us"] - call["langchain_direct_us"]
        )
        call["overhead_ratio"] = call["ours_overhead_us"] / call["langchain_overhead_us"]
        call["overhead_ratio_no_checkpointer"] = (
            call["ours_overhead_us"] / call["langchain_overhead_no_checkpointer_us"]
        )
    results["call"] = call

    # Streams: the tool round, then `chunks` answer chunks.
    pieces = answer_chunks(chunks)
    n_chunks = len(pieces)
    stream_model = ScriptedChatModel([tool_round(), pieces], repeat=True)
    full = our_client(stream_model)
    no_validation = our_client(stream_model, validation=False)

    async def bare_stream() -> AsyncIterator[ChatResponse]:
        async for chunk in stream_model.stream(prompt):
            yield chunk
        async for chunk in stream_model.stream(prompt):
            yield chunk

    def text_of(response: ChatResponse) -> bool:
        return bool(response.result and response.result.output.text)

    stream_cases: dict[str, StreamCase] = {
        "ours_direct": (bare_stream, text_of),
        "ours_chain": (
            lambda: full.prompt(QUESTION).advisor_params(params()).stream().content(),
            bool,
        ),
        "ours_chain_no_validation": (
            lambda: no_validation.prompt(QUESTION).advisor_params(params()).stream().content(),
            bool,
        ),
    }
    if lc is not None:
        lc_stream_model = lc["model"](pieces)
        lc_agent = lc["agent"](pieces)

        async def lc_bare() -> AsyncIterator[Any]:
            async for chunk in lc_stream_model.astream(messages):
                yield chunk
            async for chunk in lc_stream_model.astream(messages):
                yield chunk

        def lc_agent_stream() -> AsyncIterator[Any]:
            return lc_agent.astream({"messages": messages}, config(), stream_mode="messages")

        stream_cases["langchain_direct"] = (lc_bare, lambda c: bool(c.content))
        stream_cases["langchain_agent"] = (lc_agent_stream, lambda item: bool(item[0].content))
    stream: dict[str, Any] = {"chunks": n_chunks}
    for key, (total, first) in (await streams_us(stream_cases, streams, repeats)).items():
        stream[f"{key}_per_chunk_us"] = total / n_chunks
        stream[f"{key}_first_chunk_us"] = first
    for key, advisors in (("ours_chain", ADVISORS), ("ours_chain_no_validation", ADVISORS - 1)):
        stream[f"{key}_per_chunk_per_advisor_us"] = (
            stream[f"{key}_per_chunk_us"] - stream["ours_direct_per_chunk_us"]
        ) / advisors
    if lc is not None:
        overhead = stream["langchain_agent_per_chunk_us"] - stream["langchain_direct_per_chunk_us"]
        stream["langchain_agent_per_chunk_per_middleware_us"] = overhead / ADVISORS
        stream["per_chunk_overhead_ratio"] = (
            stream["ours_chain_per_chunk_us"] - stream["ours_direct_per_chunk_us"]
        ) / overhead
    results["stream"] = stream
    results["micro"] = await micro(seconds, repeats, chunks, streams)
    return results


async def micro(seconds: float, repeats: int, chunks: int, streams: int) -> dict[str, float]:
    """6 pass-through advisors around the model: the per-advisor cost alone."""
    model = ScriptedChatModel(["answer"], repeat=True)
    stream_model = ScriptedChatModel([["tok"] * chunks], repeat=True)
    prompt = Prompt("hello")
    request = ChatClientRequest(prompt)

    CLASSES = (("pass_through", PassThrough), ("identity", Identity))

    def chain_for(cls: type[BaseAdvisor], m: ScriptedChatModel) -> DefaultAroundAdvisorChain:
        return DefaultAroundAdvisorChain(
            [*(cls() for _ in range(ADVISORS)), ChatModelCallAdvisor(m), ChatModelStreamAdvisor(m)]
        )

    call_chains = {name: chain_for(cls, model) for name, cls in CLASSES}
    stream_chains = {name: chain_for(cls, stream_model) for name, cls in CLASSES}
    calls: dict[str, Callable[[], Awaitable[Any]]] = {"model": lambda: model.call(prompt)}
    calls |= {name: (lambda c=c: c.next_call(request)) for name, c in call_chains.items()}
    streams_: dict[str, StreamCase] = {"model": (lambda: stream_model.stream(prompt), bool)}
    streams_ |= {
        name: ((lambda c=c: c.next_stream(request)), bool) for name, c in stream_chains.items()
    }
    per_call = await calls_us(calls, seconds, repeats)
    per_stream = await streams_us(streams_, streams, repeats)
    out = {
        "model_call_us": per_call["model"],
        "model_per_chunk_us": per_stream["model"][0] / chunks,
    }
    for name, _cls in CLASSES:
        out[f"{name}_call_us"] = per_call[name]
        out[f"{name}_call_per_advisor_us"] = (per_call[name] - per_call["model"]) / ADVISORS
        out[f"{name}_per_chunk_us"] = per_stream[name][0] / chunks
        out[f"{name}_per_chunk_per_advisor_us"] = (
            out[f"{name}_per_chunk_us"] - out["model_per_chunk_us"]
        ) / ADVISORS
    return out


def report(results: dict[str, Any]) -> None:
    call, stream, micro_ = results["call"], results["stream"], results["micro"]
    versions = results["langchain_versions"]
    print("\nper call (a turn: 2 model rounds, 1 tool run)      µs      vs direct   overhead µs")
    rows = [
        ("ours: model direct (2 calls)", call["ours_direct_us"], call["ours_direct_us"]),
        ("ours: ChatClient, 6 advisors", call["ours_chain_us"], call["ours_direct_us"]),
    ]
    if versions:
        rows += [
            (
                "LangChain: fake model direct (2 calls)",
                call["langchain_direct_us"],
                call["langchain_direct_us"],
            ),
            (
                "LangChain: create_agent, 5 middleware + loop",
                call["langchain_agent_us"],
                call["langchain_direct_us"],
            ),
            (
                "LangChain: same, no checkpointer (no memory)",
                call["langchain_agent_no_checkpointer_us"],
                call["langchain_direct_us"],
            ),
        ]
    for name, value, base in rows:
        print(f"{name:48} {value:9.1f} {value / base:9.2f}x {value - base:11.1f}")
    if versions:
        print(
            f"chain overhead ours / LangChain: {call['overhead_ratio']:.3f} "
            f"(1/{1 / call['overhead_ratio']:.1f}); without its checkpointer: "
            f"{call['overhead_ratio_no_checkpointer']:.3f}; "
            f"per call ours / LangChain {call['ours_chain_us'] / call['langchain_agent_us']:.3f}"
        )
    else:
        print("LangChain is not installed (pip install -r requirements-bench.txt): no peer rows")

    print(
        f"\nstream of {stream['chunks']} answer chunks{'':13} µs/chunk  first chunk µs  "
        "µs/chunk/advisor"
    )
    keys = [
        ("ours: model direct", "ours_direct", None),
        ("ours: 6 advisors (validation holds text)", "ours_chain", "ours_chain"),
        (
            "ours: 5 advisors (no validation)",
            "ours_chain_no_validation",
            "ours_chain_no_validation",
        ),
    ]
    if versions:
        keys += [
            ("LangChain: fake model direct", "langchain_direct", None),
            ("LangChain: agent, stream_mode=messages", "langchain_agent", None),
        ]
    for name, key, per_advisor in keys:
        extra = f"{stream[f'{per_advisor}_per_chunk_per_advisor_us']:16.2f}" if per_advisor else ""
        print(
            f"{name:42} {stream[f'{key}_per_chunk_us']:9.2f} "
            f"{stream[f'{key}_first_chunk_us']:15.1f} {extra}"
        )
    if versions:
        print(
            "per-chunk overhead ours (6 advisors) / LangChain agent: "
            f"{stream['per_chunk_overhead_ratio']:.3f}"
        )

    print(
        f"\nmicro: {ADVISORS} pass-through advisors    µs/call  µs/call/advisor  µs/chunk  "
        "µs/chunk/advisor"
    )
    print(
        f"{'model direct':38} {micro_['model_call_us']:8.2f} {'':16} "
        f"{micro_['model_per_chunk_us']:9.2f}"
    )
    for name, label in (
        ("pass_through", "pass-through (hooks overridden)"),
        ("identity", "identity (default hooks)"),
    ):
        print(
            f"{label:38} {micro_[f'{name}_call_us']:8.2f} "
            f"{micro_[f'{name}_call_per_advisor_us']:16.2f} "
            f"{micro_[f'{name}_per_chunk_us']:9.2f} "
            f"{micro_[f'{name}_per_chunk_per_advisor_us']:17.2f}"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="per repetition")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--chunks", type=int, default=200, help="answer chunks per stream")
    parser.add_argument("--streams", type=int, default=20, help="streams per repetition")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    info = machine()
    header(
        "chain overhead",
        f"the advisor chain's own cost per call and per streamed chunk ({ADVISORS} advisors, "
        "in-process, scripted model) against LangChain 1.x middleware doing the same, same run",
        info,
    )
    print(f"# medians of {args.repeats} repetitions; {ADVISORS} advisors / middleware")
    results = asyncio.run(measure(args.seconds, args.repeats, args.chunks, args.streams))
    report(results)
    write_json(args.json, "chain_overhead", vars(args), results, info)
    return results


if __name__ == "__main__":
    main()
