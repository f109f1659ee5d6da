"""Chain overhead: 6 pass-through advisors around the zero-latency scripted model.

Prints µs per call and per streamed chunk for the bare model, the chain (DefaultAroundAdvisorChain)
and the full ChatClient, and the overhead per advisor. Run: ``python benchmarks/chain_overhead.py``.
Medians of several repetitions, measured in one process, so the ratios are comparable.
"""

from __future__ import annotations

import asyncio
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisors_app.core import (
    BaseAdvisor,
    ChatClient,
    ChatClientRequest,
    ChatModelCallAdvisor,
    ChatModelStreamAdvisor,
    DefaultAroundAdvisorChain,
    Prompt,
    ScriptedChatModel,
)

ADVISORS = 6
CALLS = 20_000
CHUNKS = 500
STREAMS = 40
REPEATS = 5


class PassThrough(BaseAdvisor):
    """Overrides both hooks (so streams aggregate for ``after``) and changes nothing."""

    def before(self, request, chain):
        return request

    def after(self, response, chain):
        return response


class Identity(BaseAdvisor):
    """Keeps the default hooks: the chain skips before/after and aggregation entirely."""


def median_us(samples: list[float], per: int) -> float:
    return statistics.median(samples) / per * 1e6


async def time_calls(run, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await run()
    return time.perf_counter() - start


async def time_streams(stream, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        async for _ in stream():
            pass
    return time.perf_counter() - start


async def main() -> None:
    model = ScriptedChatModel(["answer"], repeat=True)
    stream_model = ScriptedChatModel([["tok"] * CHUNKS], repeat=True)
    prompt = Prompt("hello")
    request = ChatClientRequest(prompt)

    def chain_for(cls, m):
        return DefaultAroundAdvisorChain(
            [*(cls() for _ in range(ADVISORS)), ChatModelCallAdvisor(m), ChatModelStreamAdvisor(m)]
        )

    pass_chain = chain_for(PassThrough, model)
    identity_chain = chain_for(Identity, model)
    client = ChatClient(model, default_advisors=[PassThrough() for _ in range(ADVISORS)])
    pass_stream_chain = chain_for(PassThrough, stream_model)
    identity_stream_chain = chain_for(Identity, stream_model)

    call_cases = {
        "model.call (direct)": lambda: model.call(prompt),
        f"chain, {ADVISORS} pass-through (hooks overridden)": lambda: pass_chain.next_call(request),
        f"chain, {ADVISORS} identity (default hooks)": lambda: identity_chain.next_call(request),
        f"ChatClient, {ADVISORS} pass-through": lambda: client.prompt("hello").call().acontent(),
    }
    stream_cases = {
        "model.stream (direct)": lambda: stream_model.stream(prompt),
        f"chain, {ADVISORS} pass-through (aggregates for after)": lambda: (
            pass_stream_chain.next_stream(request)
        ),
        f"chain, {ADVISORS} identity (default hooks)": lambda: identity_stream_chain.next_stream(
            request
        ),
    }
    call_results = {}
    for name, run in call_cases.items():
        await time_calls(run, 500)  # warm-up
        call_results[name] = median_us(
            [await time_calls(run, CALLS) for _ in range(REPEATS)], CALLS
        )
    stream_results = {}
    for name, run in stream_cases.items():
        await time_streams(run, 2)
        samples = [await time_streams(run, STREAMS) for _ in range(REPEATS)]
        stream_results[name] = median_us(samples, STREAMS * CHUNKS)

    machine = platform.processor() or platform.machine()
    print(f"# chain overhead — {machine}, Python {platform.python_version()}")
    print(f"# medians of {REPEATS} repetitions; {ADVISORS} advisors\n")
    base = call_results["model.call (direct)"]
    print(f"{'per call':58} {'µs':>8} {'ratio':>7} {'µs/advisor':>11}")
    for name, value in call_results.items():
        per_advisor = (value - base) / ADVISORS if value != base else 0.0
        print(f"{name:58} {value:8.2f} {value / base:7.2f} {per_advisor:11.2f}")
    base = stream_results["model.stream (direct)"]
    print(f"\n{'per streamed chunk':58} {'µs':>8} {'ratio':>7} {'µs/advisor':>11}")
    for name, value in stream_results.items():
        per_advisor = (value - base) / ADVISORS if value != base else 0.0
        print(f"{name:58} {value:8.2f} {value / base:7.2f} {per_advisor:11.2f}")


if __name__ == "__main__":
    asyncio.run(main())
