"""Embedded models: SmolLM2-135M (llama.cpp) prefill and decode on a demo-sized prompt, and
MiniLM (ONNX) embeddings/s.

Chat: a demo turn's prompt — the demo chain's system prompt and its context template holding
three real excerpts of the Python Language Reference (the demo's 200-token chunks of the
question's topic), about 650 tokens — and, beside it, the bare question (~20 tokens). Each
request answers up to ``--max-tokens`` tokens at temperature 0. A request starts with a
different number in its system prompt, so llama.cpp's prompt cache never skips the prefill.
Cases, one request at a time:

- **ours**: ``SmolLm2ChatModel.stream`` (our provider: the OpenAI client over loopback HTTP to
  the in-process llama.cpp server). Prefill = time to the first streamed token (what a user
  waits for; our provider's overhead included), tokens/s = prompt tokens / that time; decode =
  the rest of the stream per completion token after the first;
- **raw** (the peer, same run): the same request sent straight to the same server with
  ``httpx``, non-streamed, and llama.cpp's own ``timings`` of it (prompt and predicted tokens
  and milliseconds: the engine alone).

``--rounds`` rounds (at least 5): each round runs every case once, in an order rotated round by
round, so load from other work on the machine falls on every case alike. Printed: the median
and the spread (lowest–highest) over the rounds.

Embeddings: ``MiniLmEmbeddingModel.embed`` of one sentence per request (the chat and retrieval
path), and of batches of 32 (ingestion), one and four at once; the peer is the bare ONNX encoder
called directly (tokenize, run, pool, normalise) with no worker thread.

Run: ``python benchmarks/embedded_models.py`` (a few minutes on two shared cores; ``--json
PATH`` writes the results). Nothing is downloaded: the model files ship in installed packages.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisors_app.core import ChatOptions, Prompt, SystemMessage, UserMessage
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.core.providers.embedded_smollm2 import (
    MODEL_NAME,
    SmolLm2ChatModel,
    embedded_llama_server,
)
from benchmarks._common import header, machine, write_json

SENTENCE = "How does the with statement work in Python, and when should I use it?"
MEASURED = (
    "SmolLM2-135M on the embedded llama.cpp server: prefill and decode of a demo turn's "
    "~650-token prompt (and of the bare question), through our provider (streamed) and raw "
    "HTTP with llama.cpp's own timings, interleaved rounds; MiniLM embeddings/s"
)
#: (case, prompt kind, side), run in this order rotated by one each round.
CASES = (
    ("demo prompt, ours", "demo", "ours"),
    ("demo prompt, raw HTTP", "demo", "raw"),
    ("question only, ours", "question", "ours"),
    ("question only, raw HTTP", "question", "raw"),
)


def demo_prompts() -> list[tuple[str, str]]:
    """``(question, user message with the demo's excerpts)`` for each demo question."""
    import os

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "advisorsite.settings")
    import django

    django.setup()  # the demo's corpus helpers live in the Django app
    from benchmarks._demo_corpus import demo_chunks, demo_questions, excerpt_prompt

    chunks = demo_chunks()
    return [(q, excerpt_prompt(q, topic, chunks)) for q, topic in demo_questions()]


def _messages(n: int, user: str) -> list[Any]:
    from benchmarks._demo_corpus import DEMO_SYSTEM_PROMPT

    # A number first: no two requests share more than a few tokens of prefix.
    return [SystemMessage(f"Request {n}. {DEMO_SYSTEM_PROMPT}"), UserMessage(user)]


async def ours_once(model: SmolLm2ChatModel, n: int, user: str, max_tokens: int) -> dict:
    """One streamed request: time to the first token, then the rest."""
    options = ChatOptions(max_tokens=max_tokens, temperature=0.0)
    start = time.perf_counter()
    first = end = None
    usage = None
    async for chunk in model.stream(Prompt(_messages(n, user), options)):
        now = time.perf_counter()
        if first is None and chunk.result and chunk.result.output.text:
            first = now
        end = now
        if chunk.metadata.usage is not None and chunk.metadata.usage.prompt_tokens:
            usage = chunk.metadata.usage
    assert first is not None and end is not None and usage is not None
    prefill_s = first - start
    decoded = max(usage.completion_tokens - 1, 1)
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "prefill_ms": prefill_s * 1e3,
        "prefill_tokens_per_s": usage.prompt_tokens / prefill_s,
        "decode_ms_per_token": (end - first) * 1e3 / decoded,
        "decode_tokens_per_s": decoded / max(end - first, 1e-9),
    }


async def raw_once(client: Any, n: int, user: str, max_tokens: int) -> dict:
    """The same request, straight to the server; llama.cpp's own timings of it."""
    body = {
        "model": MODEL_NAME,
        "messages": [{"role": m.message_type.value, "content": m.text} for m in _messages(n, user)],
        "max_tokens": max_tokens,
        "temperature": 0.0,
    }
    response = await client.post("/chat/completions", json=body)
    response.raise_for_status()
    t = response.json()["timings"]
    return {
        "prompt_tokens": t["prompt_n"],
        "completion_tokens": t["predicted_n"],
        "prefill_ms": t["prompt_ms"],
        "prefill_tokens_per_s": t["prompt_n"] * 1e3 / t["prompt_ms"],
        "decode_ms_per_token": t["predicted_ms"] / max(t["predicted_n"], 1),
        "decode_tokens_per_s": t["predicted_n"] * 1e3 / max(t["predicted_ms"], 1e-9),
    }


def spread(samples: list[dict], key: str) -> dict[str, float]:
    values = [s[key] for s in samples]
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


async def chat(rounds: int, max_tokens: int, prompts: list[tuple[str, str]]) -> dict:
    import httpx

    model = SmolLm2ChatModel()
    base_url, key = await embedded_llama_server().aendpoint()
    samples: dict[str, list[dict]] = {case: [] for case, _, _ in CASES}
    n = 0
    async with httpx.AsyncClient(
        base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=300
    ) as client:
        await ours_once(model, -1, prompts[0][1], 8)  # warm-up
        for round_no in range(rounds):
            question, excerpts = prompts[round_no % len(prompts)]
            order = CASES[round_no % len(CASES) :] + CASES[: round_no % len(CASES)]
            for case, kind, side in order:
                n += 1
                user = excerpts if kind == "demo" else question
                once = ours_once(model, n, user, max_tokens) if side == "ours" else None
                sample = await (once or raw_once(client, n, user, max_tokens))
                samples[case].append(sample)
                print(
                    f"  round {round_no + 1} {case:24} prompt {sample['prompt_tokens']} tok: "
                    f"prefill {sample['prefill_ms']:.0f} ms, decode "
                    f"{sample['decode_tokens_per_s']:.1f} tok/s",
                    flush=True,
                )
    keys = (
        "prompt_tokens",
        "completion_tokens",
        "prefill_ms",
        "prefill_tokens_per_s",
        "decode_ms_per_token",
        "decode_tokens_per_s",
    )
    return {
        "max_tokens": max_tokens,
        "rounds": rounds,
        "cases": {case: {k: spread(s, k) for k in keys} for case, s in samples.items()},
        "samples": samples,
    }


async def embeddings(seconds: float, repeats: int) -> dict:
    model = MiniLmEmbeddingModel()
    encoder = model._loaded()
    await model.embed([SENTENCE])  # warm-up
    batch = [f"{SENTENCE} ({i})" for i in range(32)]

    async def rate(run: Any, per_call: int) -> float:
        samples = []
        for _ in range(repeats):
            start, done = time.perf_counter(), 0
            while time.perf_counter() - start < seconds:
                await run()
                done += per_call
            samples.append(done / (time.perf_counter() - start))
        return statistics.median(samples)

    async def direct_one() -> None:
        encoder.encode([SENTENCE])

    async def direct_batch() -> None:
        encoder.encode(batch)

    results: dict[str, Any] = {}
    for concurrency in (1, 4):

        async def ours_one(c: int = concurrency) -> None:
            await asyncio.gather(*(model.embed([SENTENCE]) for _ in range(c)))

        async def ours_batch(c: int = concurrency) -> None:
            await asyncio.gather(*(model.embed(batch) for _ in range(c)))

        results[f"c{concurrency}"] = {
            "ours_one_per_s": await rate(ours_one, concurrency),
            "ours_batch32_per_s": await rate(ours_batch, 32 * concurrency),
        }
    results["direct_one_per_s"] = await rate(direct_one, 1)
    results["direct_batch32_per_s"] = await rate(direct_batch, 32)
    return results


def _cell(figure: dict[str, float], digits: int) -> str:
    return f"{figure['median']:.{digits}f} ({figure['low']:.{digits}f}–{figure['high']:.{digits}f})"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved chat rounds (≥ 5)")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=0.5, help="per embedding repetition")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    info = machine()
    header("embedded models", MEASURED, info)
    prompts = demo_prompts()
    # Embeddings first: llama.cpp's threads keep spinning for a while after a request.
    embedded = asyncio.run(embeddings(args.seconds, args.repeats))
    results = {
        "chat": asyncio.run(chat(args.rounds, args.max_tokens, prompts)),
        "embeddings": embedded,
    }
    c, e = results["chat"]["cases"], results["embeddings"]
    print(
        f"\nchat, SmolLM2-135M, one request at a time, up to {args.max_tokens} tokens: median "
        f"(lowest–highest) of {args.rounds} interleaved rounds"
    )
    print(
        f"{'case':24} {'prompt tok':>10} {'prefill ms':>20} {'prefill tok/s':>20} "
        f"{'decode ms/tok':>18} {'decode tok/s':>18}"
    )
    for case, _, _ in CASES:
        r = c[case]
        print(
            f"{case:24} {r['prompt_tokens']['median']:10.0f} {_cell(r['prefill_ms'], 0):>20} "
            f"{_cell(r['prefill_tokens_per_s'], 0):>20} {_cell(r['decode_ms_per_token'], 1):>18} "
            f"{_cell(r['decode_tokens_per_s'], 1):>18}"
        )
    ours, raw = c["demo prompt, ours"], c["demo prompt, raw HTTP"]
    print(
        f"demo prompt, ours / raw: prefill time "
        f"{ours['prefill_ms']['median'] / raw['prefill_ms']['median']:.2f}x, decode rate "
        f"{ours['decode_tokens_per_s']['median'] / raw['decode_tokens_per_s']['median']:.2f}x"
    )
    print("\nembeddings, all-MiniLM-L6-v2 (int8 ONNX), embeddings/s")
    print(f"{'concurrent':>10} {'1 sentence/request':>19} {'32 per request':>15}")
    for n in (1, 4):
        r = e[f"c{n}"]
        print(f"{n:>10} {r['ours_one_per_s']:19.0f} {r['ours_batch32_per_s']:15.0f}")
    print(
        f"{'encoder':>10} {e['direct_one_per_s']:19.0f} {e['direct_batch32_per_s']:15.0f}"
        "  (bare ONNX encoder, no worker thread: the peer)"
    )
    write_json(args.json, "embedded_models", vars(args), results, info)
    return results


if __name__ == "__main__":
    main()
