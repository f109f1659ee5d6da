"""The offline prompt-injection classifier: precision, recall and latency on the shipped set.

On ``advisors_app/guards/data/guard_dataset.json`` (written for this project, never trained
on) prints the classifier's precision and recall for injections in documents and tool results
(issue 38's target: recall ≥ 0.90 at precision ≥ 0.90) and on every rail, next to a peer
measured in the same run: the keyword rule most guards start with (a regex for "ignore previous
instructions" and its like). Then the latency of one decision on texts of about 512 tokens
(2,500 characters of the dataset's documents and tool results: the target is a p50 ≤ 5 ms on
two cores).

Run: ``python benchmarks/guard_classifier.py`` (``--json PATH`` writes the results).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisors_app.core.decision import prompt_injection_classifier
from advisors_app.guards.evaluation import SHIPPED_DATASET
from benchmarks._common import header, machine, write_json

KEYWORDS = re.compile(
    r"(ignore|disregard|forget)\s+(all\s+)?(the\s+)?(previous|prior|above|earlier)\s+"
    r"(instructions|rules|directions)|system prompt|developer mode|you are now",
    re.IGNORECASE,
)
LONG_TEXT_CHARS = 2500
TEXTS = 20
REPEATS = 10


def long_texts(items: list[dict[str, str]]) -> list[str]:
    """``TEXTS`` texts of ``LONG_TEXT_CHARS`` characters: the dataset's documents and tool
    results (attacks among them, as in a real retrieval) joined in a seeded random order."""
    pool = [i["text"] for i in items if i["rail"] in ("documents", "tool_results")]
    rng = random.Random(38)
    texts = []
    for _ in range(TEXTS):
        rng.shuffle(pool)
        texts.append(" ".join(pool)[:LONG_TEXT_CHARS])
    return texts


def figures(flags: list[bool], truth: list[bool]) -> dict[str, float]:
    tp = sum(f and t for f, t in zip(flags, truth, strict=True))
    fp = sum(f and not t for f, t in zip(flags, truth, strict=True))
    fn = sum(t and not f for f, t in zip(flags, truth, strict=True))
    return {
        "precision": tp / (tp + fp) if tp + fp else 0.0,
        "recall": tp / (tp + fn) if tp + fn else 0.0,
        "items": len(truth),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()
    header(
        "Prompt-injection classifier",
        "the shipped offline classifier (hashed n-grams, numpy) on the shipped guard dataset, "
        "against a keyword regex, and its latency on a 512-token text, in-process",
        info,
    )
    classifier = prompt_injection_classifier()
    items = json.loads(SHIPPED_DATASET.read_text(encoding="utf-8"))
    out: dict[str, object] = {}
    scopes = {
        "documents_and_tool_results": [
            i for i in items if i["rail"] in ("documents", "tool_results")
        ],
        "all_rails": items,
    }
    for scope, chosen in scopes.items():
        truth = [i["label"] == "attack" for i in chosen]
        ours = [classifier.decide_sync("", i["text"]).choice == "attack" for i in chosen]
        peer = [bool(KEYWORDS.search(i["text"])) for i in chosen]
        out[scope] = {"classifier": figures(ours, truth), "keywords": figures(peer, truth)}
        c, k = out[scope]["classifier"], out[scope]["keywords"]  # type: ignore[index]
        print(
            f"{scope:>28}: classifier precision {c['precision']:.3f} recall {c['recall']:.3f} | "
            f"keywords precision {k['precision']:.3f} recall {k['recall']:.3f} ({c['items']} items)"
        )
    texts = long_texts(items)
    for text in texts:
        classifier.decide_sync("", text)
    timings = []
    for _ in range(REPEATS):
        for text in texts:
            started = time.perf_counter()
            classifier.decide_sync("", text)
            timings.append((time.perf_counter() - started) * 1000)
    timings.sort()
    p50 = statistics.median(timings)
    out["latency_ms"] = {"p50": p50, "p95": timings[int(0.95 * len(timings)) - 1]}
    print(
        f"latency on {len(texts)} texts of {LONG_TEXT_CHARS:,} characters (~512 tokens): "
        f"p50 {p50:.2f} ms, p95 {out['latency_ms']['p95']:.2f} ms (target p50 ≤ 5 ms)"
    )
    write_json(args.json, "guard_classifier", {"text_chars": len(text)}, out, info)


if __name__ == "__main__":
    main()
