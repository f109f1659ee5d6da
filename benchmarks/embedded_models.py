"""Embedded models: chat tokens/s (SmolLM2-135M on llama.cpp) and embeddings/s (MiniLM, ONNX).

With one and with four concurrent requests, in one process:

- chat: ``SmolLm2ChatModel.call`` (our provider: the OpenAI client over loopback HTTP to the
  in-process llama.cpp server, 2 parallel slots) with ``max_tokens`` completion tokens per
  request; completion tokens per second of wall time, over all requests, and the mean time to
  first token of a stream. The peer, in the same run: the same request sent straight to the
  same server with ``httpx`` (no provider code), so the difference is our provider's cost;
- embeddings: ``MiniLmEmbeddingModel.embed`` of one sentence per request (the chat and
  retrieval path), and of batches of 32 (ingestion); the peer is the bare ONNX encoder
  called directly (tokenize, run, pool, normalise) with no worker thread.

Run: ``python benchmarks/embedded_models.py`` (about a minute on two cores; ``--json PATH``
writes the results). Nothing is downloaded: the model files ship in installed packages.
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

from advisors_app.core import ChatOptions, Prompt
from advisors_app.core.providers.embedded_minilm import MiniLmEmbeddingModel
from advisors_app.core.providers.embedded_smollm2 import (
    MODEL_NAME,
    SmolLm2ChatModel,
    embedded_llama_server,
)
from benchmarks._common import describe, machine, write_json

QUESTIONS = [
    "Describe how a Python list differs from a tuple.",
    "Explain what a context manager is in Python.",
    "What does the yield keyword do?",
    "How do Python decorators work?",
]
SENTENCE = "How does the with statement work in Python, and when should I use it?"


async def chat_round(model: SmolLm2ChatModel, concurrency: int, max_tokens: int) -> dict:
    """``concurrency`` requests at once; tokens/s of the whole round."""
    options = ChatOptions(max_tokens=max_tokens, temperature=0.0)
    prompts = [Prompt(QUESTIONS[i % len(QUESTIONS)], options) for i in range(concurrency)]
    start = time.perf_counter()
    responses = await asyncio.gather(*(model.call(p) for p in prompts))
    wall = time.perf_counter() - start
    tokens = sum(r.metadata.usage.completion_tokens for r in responses)
    return {"tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall}


async def raw_round(client: Any, concurrency: int, max_tokens: int) -> dict:
    """The same requests straight to the llama.cpp server's OpenAI endpoint."""

    async def one(i: int) -> int:
        body = {
            "model": MODEL_NAME,
            "messages": [{"role": "user", "content": QUESTIONS[i % len(QUESTIONS)]}],
            "max_tokens": max_tokens,
            "temperature": 0.0,
        }
        response = await client.post("/chat/completions", json=body)
        response.raise_for_status()
        return int(response.json()["usage"]["completion_tokens"])

    start = time.perf_counter()
    tokens = sum(await asyncio.gather(*(one(i) for i in range(concurrency))))
    wall = time.perf_counter() - start
    return {"tokens": tokens, "wall_s": wall, "tokens_per_s": tokens / wall}


async def first_token_s(model: SmolLm2ChatModel, concurrency: int, max_tokens: int) -> float:
    options = ChatOptions(max_tokens=max_tokens, temperature=0.0)

    async def one(i: int) -> float:
        start = time.perf_counter()
        async for chunk in model.stream(Prompt(QUESTIONS[i % len(QUESTIONS)], options)):
            if chunk.result and chunk.result.output.text:
                return time.perf_counter() - start
        return time.perf_counter() - start

    return statistics.mean(await asyncio.gather(*(one(i) for i in range(concurrency))))


def best(rounds: list[dict]) -> dict:
    """The median round by tokens/s (rounds differ by the machine's other load)."""
    ordered = sorted(rounds, key=lambda r: r["tokens_per_s"])
    return ordered[len(ordered) // 2]


async def chat(rounds: int, max_tokens: int) -> dict:
    import httpx

    model = SmolLm2ChatModel()
    base_url, key = await embedded_llama_server().aendpoint()
    await model.call(Prompt("Hello", ChatOptions(max_tokens=8)))  # warm-up
    results: dict[str, Any] = {"max_tokens": max_tokens}
    async with httpx.AsyncClient(
        base_url=base_url, headers={"Authorization": f"Bearer {key}"}, timeout=300
    ) as client:
        for concurrency in (1, 4):
            # Rounds alternate ours / raw, so load from other work falls on both alike.
            ours_rounds, raw_rounds = [], []
            for _ in range(rounds):
                ours_rounds.append(await chat_round(model, concurrency, max_tokens))
                raw_rounds.append(await raw_round(client, concurrency, max_tokens))
            ours, raw = best(ours_rounds), best(raw_rounds)
            results[f"c{concurrency}"] = {
                "ours_tokens_per_s": ours["tokens_per_s"],
                "ours_tokens": ours["tokens"],
                "raw_http_tokens_per_s": raw["tokens_per_s"],
                "ratio_vs_raw": ours["tokens_per_s"] / raw["tokens_per_s"],
                "first_token_s": await first_token_s(model, concurrency, max_tokens),
            }
    return results


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="chat rounds per measurement")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=0.5, help="per embedding repetition")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()
    print(f"# embedded models — {describe(info)}")
    # Embeddings first: llama.cpp's threads keep spinning for a while after a request.
    embedded = asyncio.run(embeddings(args.seconds, args.repeats))
    results = {"chat": asyncio.run(chat(args.rounds, args.max_tokens)), "embeddings": embedded}
    c, e = results["chat"], results["embeddings"]
    print(f"\nchat, SmolLM2-135M, {args.max_tokens} tokens per request (median of {args.rounds})")
    print(
        f"{'concurrent':>10} {'ours tok/s':>11} {'raw HTTP tok/s':>15} {'ratio':>6} "
        f"{'1st tok s':>10}"
    )
    for n in (1, 4):
        r = c[f"c{n}"]
        print(
            f"{n:>10} {r['ours_tokens_per_s']:11.1f} {r['raw_http_tokens_per_s']:15.1f} "
            f"{r['ratio_vs_raw']:6.2f} {r['first_token_s']:10.2f}"
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


if __name__ == "__main__":
    main()
