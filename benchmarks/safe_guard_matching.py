"""SafeGuard matching: folded Aho-Corasick vs Spring AI's per-word substring loop and a regex.

For word lists of 100 / 10,000 / 100,000 words and a 2,000-character prompt with no match (the
common case: every word is tried), prints µs per check for:

* ``spring``: Spring AI's rule, ``any(w.lower() in text.lower() for w in words)``;
* ``regex``: one compiled ``re`` alternation of the words (lower-cased text);
* ``safeguard``: ``SafeGuardAdvisor``'s matcher (NFKC, invisible characters, homoglyphs and
  case folded, then an Aho-Corasick automaton), whole-word mode off.

Run: ``python benchmarks/safe_guard_matching.py`` (``--json PATH`` writes the results). Medians of
several repetitions in one process.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from advisors_app.core.advisors._matching import WordMatcher
from benchmarks._common import header, machine, write_json

REPEATS = 5
random.seed(7)


def words(count: int) -> list[str]:
    return [
        "".join(random.choices(string.ascii_lowercase, k=random.randint(6, 12))) + "q"
        for _ in range(count)
    ]


def prompt() -> str:
    vocabulary = ["the", "weather", "is", "fine", "today", "and", "tomorrow", "we", "travel"]
    text = " ".join(random.choice(vocabulary) for _ in range(400))
    return text[:2000]


def timed(check: Callable[[str], bool], text: str, loops: int) -> float:
    samples = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        for _ in range(loops):
            check(text)
        samples.append((time.perf_counter() - started) / loops * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()
    header(
        "SafeGuard matching",
        "SafeGuardAdvisor's matcher on a 2,000-character prompt that matches nothing, against "
        "Spring AI's word-by-word rule and a regex alternation, in-process",
        info,
    )
    out = {}
    text = prompt()
    print(f"{'words':>8} {'spring µs':>11} {'regex µs':>10} {'safeguard µs':>13} {'vs spring':>10}")
    for count in (100, 10_000, 100_000):
        listed = words(count)
        lowered = [w.lower() for w in listed]
        pattern = re.compile("|".join(map(re.escape, sorted(lowered, key=len, reverse=True))))
        matcher = WordMatcher({None: listed})
        assert not matcher.search(text)
        loops = max(3, 200_000 // count)

        def spring(t: str, lowered: list[str] = lowered) -> bool:
            folded = t.lower()
            return any(w in folded for w in lowered)

        results = [
            timed(spring, text, loops),
            timed(lambda t, p=pattern: p.search(t.lower()) is not None, text, loops),
            timed(lambda t, m=matcher: bool(m.search(t)), text, loops),
        ]
        ratio = results[0] / results[2]
        out[str(count)] = {
            "spring_us": results[0],
            "regex_us": results[1],
            "safeguard_us": results[2],
            "ratio_spring_over_safeguard": ratio,
        }
        print(
            f"{count:>8} {results[0]:>11.1f} {results[1]:>10.1f} {results[2]:>13.1f} {ratio:>9.1f}x"
        )
    write_json(args.json, "safe_guard_matching", {"prompt_chars": len(text)}, out, info)


if __name__ == "__main__":
    main()
