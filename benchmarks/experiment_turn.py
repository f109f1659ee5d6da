"""Experiments (issue 37): what serving a turn from an experiment adds, against the same turn
without one, measured in the same run.

Two chains alike (no advisors, the shipped scripted model, two published versions answering the
same), one with a running 50/50 experiment on ``production``. In-process ``call_turn`` later
turns of one conversation, in interleaved blocks (load from other work falls on both alike):

1. **assignment** — the ``assign`` stage's hook alone (:func:`advisors_app.experiments.serving.
   assign`) with the plan cached, for a new unit (hash and split) and for a conversation already
   on an arm: µs per turn, target ≤ 50 µs;
2. **turn** — p50 of a later call turn with and without the experiment, and the difference;
3. **statements** — SQL statements of a later turn with and without (target: the same).

Run: ``python benchmarks/experiment_turn.py [--turns 400] [--json PATH]`` (a throwaway embedded
PostgreSQL unless ``DATABASE_URL`` is set).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turn_pipeline_settings")
os.environ.setdefault("ADVISORS_EMBEDDED_DB", "throwaway")
os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only")

from benchmarks._common import header, machine, write_json

TARGET_US = 50.0
BLOCK = 20


def setup() -> tuple[Any, Any]:
    from django.contrib.auth import get_user_model

    from advisors_app.definition import publish
    from tests.experiment_helpers import make_experiment
    from tests.factories import make_chain, scripted_model

    def chain(slug: str) -> Any:
        made = make_chain(slug, model=scripted_model(f"{slug}-a", responses=("Sure.",)))
        made.chat_model = scripted_model(f"{slug}-b", responses=("Sure.",))
        made.save()
        publish(made, message="b")
        return made

    chain("bench-plain")
    make_experiment(chain("bench-exp"))
    user = get_user_model().objects.create_user("bench-user", password="pw")
    return user, None


def assignment_us(user: Any, rounds: int = 20_000) -> dict[str, float]:
    """µs per call of the assign hook, the plan cached: a new unit, and a pinned conversation."""
    from dataclasses import replace

    from advisors_app.definition.runtime import resolve_target
    from advisors_app.experiments.serving import assign
    from advisors_app.memory.conversations import StoredConversation
    from advisors_app.turn.input import TurnInput
    from advisors_app.turn.state import Assignment

    asked = resolve_target("bench-exp")
    data = TurnInput(message="hi")
    fresh = Assignment("bench-exp", user, data, asked, asked, None)
    assign(fresh)  # the plan read once
    on_arm = assign(fresh)
    stored = StoredConversation(
        1, user.pk, 2, on_arm.version_id, on_arm.number, "", asked.chain_id, ""
    )
    pinned = Assignment("bench-exp", user, replace(data, conversation_id="c"), asked, asked, stored)
    figures = {}
    for name, value in (("new_unit_us", fresh), ("pinned_us", pinned)):
        runs = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(rounds):
                assign(value)
            runs.append((time.perf_counter() - started) / rounds * 1e6)
        figures[name] = statistics.median(runs)
    return figures


async def turns(user: Any, count: int) -> dict[str, Any]:
    from advisors_app.turn import call_turn

    conversations = {}
    for slug in ("bench-plain", "bench-exp"):
        conversations[slug] = (await call_turn(slug, user, "hello")).conversation_id
    times: dict[str, list[float]] = {"bench-plain": [], "bench-exp": []}
    for _ in range(max(1, count // BLOCK)):
        for slug in times:
            for _ in range(BLOCK):
                started = time.perf_counter()
                await call_turn(slug, user, "and now?", conversation_id=conversations[slug])
                times[slug].append((time.perf_counter() - started) * 1000)
    plain, exp = (statistics.median(times[s]) for s in ("bench-plain", "bench-exp"))
    return {"plain_p50_ms": plain, "experiment_p50_ms": exp, "difference_us": (exp - plain) * 1000}


def statements(user: Any) -> dict[str, int]:
    from asgiref.sync import async_to_sync
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from advisors_app.turn.input import TurnInput
    from advisors_app.turn.open import open_turn

    counts = {}
    for slug in ("bench-plain", "bench-exp"):
        conversation = async_to_sync(_first)(slug, user)
        with CaptureQueriesContext(connection) as queries:
            open_turn(slug, user, TurnInput(message="hi", conversation_id=conversation))
        counts[slug] = len(queries.captured_queries)
    return {"plain_open": counts["bench-plain"], "experiment_open": counts["bench-exp"]}


async def _first(slug: str, user: Any) -> str:
    from advisors_app.turn import call_turn

    return str((await call_turn(slug, user, "hello")).conversation_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=400, help="later turns per side")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    info = machine()
    header(
        "experiment turn",
        "the assign hook alone (plan cached) and later call turns with and without a running "
        "50/50 experiment, in-process, interleaved blocks",
        info,
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    user, _ = setup()
    results = {
        "assignment": assignment_us(user),
        "turn": asyncio.run(turns(user, args.turns)),
        "statements": statements(user),
    }
    a, t, s = results["assignment"], results["turn"], results["statements"]
    print(
        f"\nassign hook: new unit {a['new_unit_us']:.2f} µs, pinned {a['pinned_us']:.2f} µs "
        f"(target ≤ {TARGET_US:g} µs)"
    )
    print(
        f"later call turn p50: {t['experiment_p50_ms']:.3f} ms with, {t['plain_p50_ms']:.3f} ms "
        f"without ({t['difference_us']:+.1f} µs)"
    )
    print(
        f"statements opening a later turn: {s['experiment_open']} with, {s['plain_open']} without"
    )
    write_json(args.json, "experiment_turn", {"turns": args.turns, "block": BLOCK}, results, info)


if __name__ == "__main__":
    main()
