"""The in-process half of ``turn_pipeline.py``, run in one code tree: ours, or the baseline's.

``turn_pipeline.py`` starts this file as a script with ``--root`` (the tree to import
``advisors_app``, ``advisorsite`` and ``tests.factories`` from) and ``DATABASE_URL`` (that
tree's own database: the two trees' schemas differ). It only uses what both trees have: the
turn service's ``call_turn`` / ``stream_turn`` (chain slug, user, message, conversation id),
the core ``ChatClient`` and the test factories. Steps (``--steps``):

- ``setup``: migrate, then the chains (SafeGuard + MessageChatMemory + SimpleLogger on the
  scripted model, the same model with no advisors, and the memory chain with long answers for
  the stream row) and the users the clients log in as (a session cookie, API tokens);
- ``sql``: statements, commits and ``sync_to_async`` hops of a first and a later turn, counted
  as ``tests/test_turn_queries.py`` counts them (``CaptureQueriesContext`` on the connection
  of asgiref's one worker thread, where the service's database work runs outside a request);
- ``stream``: µs per streamed chunk through ``stream_turn`` (the service's observers attached:
  ``CallTrace`` and OpenTelemetry), through the core chain alone, and of the bare model, from
  the slope between a short and a long answer (a turn's fixed costs cancel out); also the
  in-process time of a later ``call_turn`` against the core chain's call, and a later
  ``stream_turn``'s time to its first delta (the service's share of time to first token).

The results go to ``--out`` as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

PREFIX = "turnbench-"
WORDS = ["keylogger", "ransomware"]
MEMORY_ADVISORS = (
    ("safe_guard", {"words": WORDS}),
    ("message_chat_memory", {"max_messages": 10}),
    ("simple_logger", {}),
)
ADVISORS = len(MEMORY_ADVISORS)


def _turn_service() -> Any:
    """``call_turn`` and ``stream_turn`` of the tree measured: ``advisors_app.turn`` since the
    turn became a package (issue 35), ``advisors_app.services`` in the baselines before it."""
    try:
        import advisors_app.turn as service
    except ImportError:
        import advisors_app.services as service  # type: ignore[no-redef]
    return service.call_turn, service.stream_turn


def chunks(n: int) -> list[str]:
    return [f"w{i} " for i in range(n)]


def setup(args: argparse.Namespace) -> dict[str, Any]:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client
    from rest_framework.authtoken.models import Token

    from tests.factories import make_chain, scripted_model

    call_command("migrate", verbosity=0, interactive=False)
    model = scripted_model(f"{PREFIX}model", responses=(chunks(args.answer_chunks),))
    make_chain(f"{PREFIX}memory", model=model, advisors=MEMORY_ADVISORS)
    make_chain(f"{PREFIX}bare", model=model)
    for n in (args.small, args.large):
        long = scripted_model(f"{PREFIX}model-{n}", responses=(chunks(n),))
        make_chain(f"{PREFIX}stream-{n}", model=long, advisors=MEMORY_ADVISORS)
    users = get_user_model().objects
    users.create_user(f"{PREFIX}inprocess")
    ws_user = users.create_user(f"{PREFIX}ws")
    client = Client()
    client.force_login(ws_user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
    tokens = [
        Token.objects.create(user=users.create_user(f"{PREFIX}rest{i}")).key
        for i in range(args.clients)
    ]
    return {
        "memory_chain": f"{PREFIX}memory",
        "bare_chain": f"{PREFIX}bare",
        "answer": "".join(chunks(args.answer_chunks)),
        "cookie": cookie,
        "tokens": tokens,
    }


# --- SQL statements, commits and thread hops -----------------------------------------------------

_MARKERS = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT", "ROLLBACK TO")


def _cost(log: list[str]) -> tuple[int, int]:
    """Statements (transaction markers left out) and commits: ``COMMIT``s plus writes sent
    outside a transaction block (PostgreSQL commits each by itself)."""
    statements = commits = 0
    in_block = False
    for sql in log:
        word = sql.strip().upper()
        if word == "BEGIN":
            in_block = True
        elif word in ("COMMIT", "ROLLBACK"):
            commits += word == "COMMIT"
            in_block = False
        elif not word.startswith(_MARKERS):
            statements += 1
            commits += not in_block and not word.startswith("SELECT")
    return statements, commits


async def counted(turn: Any) -> dict[str, Any]:
    """Run ``await turn()`` counting statements, commits and ``sync_to_async`` hops."""
    from asgiref.sync import SyncToAsync
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    executor = SyncToAsync.single_thread_executor
    worker = executor.submit(lambda: connections["default"]).result()
    original = SyncToAsync.__call__
    hops = 0

    async def hop(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await original(self, *args, **kwargs)

    capture = CaptureQueriesContext(worker)
    executor.submit(capture.__enter__).result()
    SyncToAsync.__call__ = hop  # type: ignore[method-assign]
    try:
        result = await turn()
    finally:
        SyncToAsync.__call__ = original  # type: ignore[method-assign]
        executor.submit(capture.__exit__, None, None, None).result()
    log = [q["sql"] for q in capture.captured_queries]
    statements, commits = _cost(log)
    return {
        "statements": statements,
        "commits": commits,
        "hops": hops,
        "sql": [sql[:300] for sql in log],
        "result": result,
    }


async def sql_costs(user: Any) -> dict[str, Any]:
    call_turn, stream_turn = _turn_service()

    chain = f"{PREFIX}memory"
    await call_turn(chain, user, "hello")  # loads and compiles the chain

    async def first() -> str:
        return (await call_turn(chain, user, "hi again")).conversation_id

    async def later() -> None:
        await call_turn(chain, user, "and now?", conversation_id=conversation)

    async def later_stream() -> None:
        stream = await stream_turn(chain, user, "and then?", conversation_id=conversation)
        async for _event in stream:
            pass

    out = {"first": await counted(first)}
    conversation = out["first"].pop("result")
    out["later"] = await counted(later)
    out["later_stream"] = await counted(later_stream)
    for cost in out.values():
        cost.pop("result", None)
    return out


# --- stream cost per chunk ---------------------------------------------------------------------


async def stream_costs(user: Any, args: argparse.Namespace) -> dict[str, Any]:
    from advisors_app.core import CONVERSATION_ID, ChatClient, Prompt, ScriptedChatModel
    from advisors_app.core.advisors import (
        MessageChatMemoryAdvisor,
        SafeGuardAdvisor,
        SimpleLoggerAdvisor,
    )
    from advisors_app.core.memory import InMemoryChatMemoryRepository, MessageWindowChatMemory

    call_turn, stream_turn = _turn_service()

    sizes = (args.small, args.large)
    models = {n: ScriptedChatModel([chunks(n)], repeat=True) for n in sizes}
    clients = {
        n: ChatClient(
            models[n],
            default_advisors=[
                SafeGuardAdvisor(WORDS),
                MessageChatMemoryAdvisor(
                    MessageWindowChatMemory(InMemoryChatMemoryRepository(), max_messages=10)
                ),
                SimpleLoggerAdvisor(),
            ],
        )
        for n in sizes
    }
    prompt = Prompt("hello")
    turns = iter(range(10**9))

    async def service(n: int) -> tuple[float, float]:
        start = time.perf_counter()
        first = None
        # A new conversation each time: no history grows with the answers.
        stream = await stream_turn(f"{PREFIX}stream-{n}", user, "hello")
        async for event in stream:
            if first is None and type(event).__name__ == "DeltaEvent":
                first = time.perf_counter()
        end = time.perf_counter()
        return end - start, (first or end) - start

    async def engine(n: int) -> tuple[float, float]:
        start = time.perf_counter()
        first = None
        spec = clients[n].prompt("hello").advisor_params({CONVERSATION_ID: f"e{next(turns)}"})
        async for _chunk in spec.stream().chat_client_responses():
            first = first or time.perf_counter()
        end = time.perf_counter()
        return end - start, (first or end) - start

    async def bare(n: int) -> tuple[float, float]:
        start = time.perf_counter()
        first = None
        async for _chunk in models[n].stream(prompt):
            first = first or time.perf_counter()
        end = time.perf_counter()
        return end - start, (first or end) - start

    cases = {"service": service, "engine": engine, "bare": bare}
    totals: dict[tuple[str, int], list[float]] = {(c, n): [] for c in cases for n in sizes}
    firsts: dict[str, list[float]] = {c: [] for c in cases}
    for case in cases.values():  # warm-up: chains compiled, code paths hot
        for n in sizes:
            await case(n)
    for _ in range(args.repeats):
        for name, case in cases.items():
            for n in sizes:
                total, first = await case(n)
                totals[name, n].append(total)
                if n == args.small:
                    firsts[name].append(first)
    out: dict[str, Any] = {"sizes": list(sizes), "repeats": args.repeats, "advisors": ADVISORS}
    for name in cases:
        small = statistics.median(totals[name, args.small])
        large = statistics.median(totals[name, args.large])
        out[f"{name}_per_chunk_us"] = (large - small) / (args.large - args.small) * 1e6
        out[f"{name}_small_us"] = small * 1e6
        out[f"{name}_large_us"] = large * 1e6
        out[f"{name}_first_chunk_us"] = statistics.median(firsts[name]) * 1e6
    for name in ("service", "engine"):
        out[f"{name}_per_chunk_per_advisor_us"] = (
            out[f"{name}_per_chunk_us"] - out["bare_per_chunk_us"]
        ) / ADVISORS

    # A later call turn in-process against the core chain's call (both on the short answer).
    chain = f"{PREFIX}memory"
    conversation = (await call_turn(chain, user, "hello")).conversation_id
    engine_client = clients[args.small]
    calls: dict[str, list[float]] = {"service": [], "engine": []}
    for i in range(args.repeats * 3):
        start = time.perf_counter()
        await call_turn(chain, user, "and now?", conversation_id=conversation)
        calls["service"].append(time.perf_counter() - start)
        start = time.perf_counter()
        spec = engine_client.prompt("and now?").advisor_params({CONVERSATION_ID: "calls"})
        await spec.call().acontent()
        calls["engine"].append(time.perf_counter() - start)
        if i % 20 == 19:  # keep the window read what it is on a short conversation
            conversation = (await call_turn(chain, user, "hello")).conversation_id
    out["call_turn_us"] = statistics.median(calls["service"]) * 1e6
    out["engine_call_us"] = statistics.median(calls["engine"]) * 1e6

    # The service's share of a transport's time to first token: a later turn's first delta.
    firsts_later: list[float] = []
    for i in range(args.repeats * 3):
        if i % 20 == 0:
            conversation = (await call_turn(chain, user, "hello")).conversation_id
        start = time.perf_counter()
        first = None
        stream = await stream_turn(chain, user, "and now?", conversation_id=conversation)
        async for event in stream:
            if first is None and type(event).__name__ == "DeltaEvent":
                first = time.perf_counter()
        firsts_later.append((first or time.perf_counter()) - start)
    out["stream_turn_later_first_delta_us"] = statistics.median(firsts_later) * 1e6
    return out


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    from django.contrib.auth import get_user_model

    user = await get_user_model().objects.aget(username=f"{PREFIX}inprocess")
    out: dict[str, Any] = {}
    if "sql" in args.steps:
        out["sql"] = await sql_costs(user)
    if "stream" in args.steps:
        out["stream"] = await stream_costs(user, args)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the code tree to import")
    parser.add_argument("--out", required=True, help="write the results (JSON) here")
    parser.add_argument("--steps", default="setup,sql,stream")
    parser.add_argument("--answer-chunks", type=int, default=8)
    parser.add_argument("--clients", type=int, default=4, help="API tokens to create")
    parser.add_argument("--small", type=int, default=50, help="chunks of the short answer")
    parser.add_argument("--large", type=int, default=1000, help="chunks of the long answer")
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    args.steps = set(args.steps.split(","))
    root = str(Path(args.root).resolve())
    sys.path.insert(0, root)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "turn_pipeline_settings")

    import django

    django.setup()
    import advisors_app

    where = str(Path(advisors_app.__file__).resolve())
    if not where.startswith(root + os.sep):
        raise SystemExit(f"advisors_app came from {where}, not from the tree {root}")
    out: dict[str, Any] = {"root": root}
    if "setup" in args.steps:
        out["setup"] = setup(args)
    if args.steps & {"sql", "stream"}:
        out.update(asyncio.run(measure(args)))
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
