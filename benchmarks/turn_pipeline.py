"""Turn pipeline: what a chat turn costs through the Django layer, ours vs the code before issue 17.

Issue 17 ("one turn pipeline") asks for these figures printed against those of the code as it
was when the issue was filed (commit ``383b07d``, "before"), measured in the same run. The
chain is SafeGuard + MessageChatMemory (window of 10) + SimpleLogger on the shipped scripted
model, answering 8 chunks; its peer for time to first token is the same model with no advisors.

1. SQL statements, commits and ``sync_to_async`` thread hops of a first and of a later turn
   (``call_turn`` in-process, counted as ``tests/test_turn_queries.py`` counts them);
   target for a later turn: ≤ 7 statements in 2 commits (and ≤ 5 hops) — 6 in 1 until issue 36
   stored the user's message before the model runs (one statement, an asynchronous commit).
2. Time to first token over the websocket and over SSE (``POST /api/chains/<slug>/stream/``),
   p50 and p95 over later turns of one conversation sent one after the other, measured by a
   client on loopback against one daphne process, minus the bare scripted model's own time
   to its first chunk (in-process, some µs): target ≤ 3 ms p50 for the memory chain.
3. REST ``call`` turns/s of one daphne process at concurrency 4 (four clients, each with its
   own API token and conversation, one request at a time), with the server's CPU use.
4. Stream cost per chunk per advisor through ``stream_turn`` in-process, with the observers
   the service attaches (``CallTrace``, OpenTelemetry): target ≤ 2 µs; beside it the same
   three advisors in the core ``ChatClient`` alone (the engine figure), both from the slope
   between a short and a long answer (a turn's fixed costs cancel out).

5. The floors under time to first token, on our side only, measured between the blocks of
   row 2 by the same kinds of client (``_floors.py``): a bare ASGI app under daphne sending the
   same events over SSE and over a websocket, and an ``async def`` Django view streaming them
   behind the site's middleware (no authentication, no database, no turn). What a transport
   costs above its floor is ours to cut; the floors are daphne's, Django's and the client's.

"Before" is built from a temporary ``git worktree`` of ``--baseline`` (removed at the end) and
runs on the same machine, the same PostgreSQL server (a database of its own: the schemas
differ) and the same virtualenv; its websocket frame names the text ``text`` where ours says
``message``. Repetitions interleave the two sides (blocks of turns, REST runs, in-process
rounds), so load from other work falls on both alike. Both servers use the in-memory channel
layer and their own site settings (ours pools connections, before opens one per request), with
``DEBUG`` off and throttling off (``turn_pipeline_settings.py``). The clients run in this
process and share the cores with the server.

Run: ``.venv/bin/python benchmarks/turn_pipeline.py`` (about a minute; ``--baseline none``
for our side only, ``--ours HEAD`` to measure a commit instead of the working tree,
``--json PATH`` writes the results). With ``--database-url`` or ``DATABASE_URL`` it uses that
server, otherwise a throwaway embedded PostgreSQL; either way in databases it drops at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from websockets.asyncio.client import connect  # noqa: E402

from benchmarks._common import describe, machine, percentile, write_json  # noqa: E402

BASELINE_REF = "383b07d"
LOGS = ROOT / "var" / "benchmarks"
TARGETS = {
    # Issue 36: a later turn stores the user's message before the model runs (one statement, an
    # asynchronous commit), so that a server killed mid-turn does not lose it: 6 / 1 before.
    "statements": 7,
    "commits": 2,
    "hops": 5,
    "ttft_p50_ms": 3.0,
    "turns_per_s": 100.0,
    "per_chunk_per_advisor_us": 2.0,
}


# --- code trees, databases, servers ------------------------------------------------------------


def git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@contextlib.contextmanager
def code_tree(ref: str | None, scratch: Path) -> Iterator[Path]:
    """The working tree for ``ref=None``, else a detached worktree of ``ref`` (removed after)."""
    if ref is None:
        yield ROOT
        return
    path = scratch / f"tree-{ref.replace('/', '-')}"
    git("worktree", "add", "--detach", "--quiet", str(path), ref)
    try:
        yield path
    finally:
        # --force: the run leaves __pycache__ directories (untracked files) in it.
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)])


def server_url(given: str | None) -> str:
    """A PostgreSQL server to create the databases on: ``given``, or a throwaway embedded one."""
    if given:
        return given
    from advisors_app.embedded_postgres import start

    scratch = Path(tempfile.mkdtemp(prefix="turnbench-pg-"))
    # pgserver's own exit handler (registered inside start, so run first) stops the server and
    # deletes pgdata; this then removes the empty parent.
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return start(scratch / "pgdata", cleanup_mode="delete")


@contextlib.contextmanager
def database(url: str, name: str) -> Iterator[str]:
    """A new database ``name`` on ``url``'s server (dropped after); its URL."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield urlsplit(url)._replace(path="/" + quote(name, safe="")).geturl()
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def child_env(database_url: str) -> dict[str, str]:
    """A child's environment: the side's database, our settings module, no inherited setup."""
    drop = {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "REDIS_URL", "ADVISORS_EMBEDDED_DB"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        PYTHONPATH=str(BENCH),
        DJANGO_SETTINGS_MODULE="turn_pipeline_settings",
        DATABASE_URL=database_url,
        DJANGO_SECRET_KEY="benchmark-only-not-secret",
        DJANGO_DEBUG="false",
    )
    return env


def worker(side: Side, steps: str, args: argparse.Namespace) -> dict[str, Any]:
    """Run ``_turn_worker.py`` in ``side``'s tree; its JSON."""
    out = side.scratch / f"{side.name}-{steps.replace(',', '-')}.json"
    command = [
        *(sys.executable, str(BENCH / "_turn_worker.py"), "--root", str(side.tree)),
        *("--out", str(out), "--steps", steps, "--clients", str(args.concurrency)),
        *("--small", str(args.small), "--large", str(args.large)),
        *("--repeats", str(args.repeats)),
    ]
    done = subprocess.run(command, env=child_env(side.database_url), capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{side.name}: the worker failed\n{done.stdout}\n{done.stderr}")
    return json.loads(out.read_text())


class Server:
    """``daphne advisorsite.asgi:application`` started in a code tree, on a port the OS picks."""

    def __init__(
        self,
        side: Side,
        app: str = "advisorsite.asgi:application",
        name: str = "",
        env: dict[str, str] | None = None,
    ) -> None:
        self.side = side
        self.app = app
        self.env = env or {}
        self.log_path = LOGS / f"turn_pipeline-{name or side.name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Server:
        LOGS.mkdir(parents=True, exist_ok=True)
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [
                *(sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", "0"),
                *("--access-log", os.devnull, self.app),
            ],
            cwd=self.side.tree,
            env=child_env(self.side.database_url) | self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        marker = "Listening on TCP address 127.0.0.1:"
        while time.monotonic() < deadline and self.process.poll() is None:
            text = self.log_path.read_text(errors="replace")
            if marker in text:
                self.port = int(text.split(marker, 1)[1].split()[0])
                return self
            time.sleep(0.05)
        self.stop()
        raise SystemExit(f"{self.side.name}: daphne did not start:\n{self.log_path.read_text()}")

    def cpu_seconds(self) -> float:
        assert self.process is not None
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None


class Side:
    """One side of the comparison: its tree, database, fixtures and figures."""

    def __init__(self, name: str, tree: Path, database_url: str, scratch: Path) -> None:
        self.name, self.tree, self.database_url, self.scratch = name, tree, database_url, scratch
        self.fixtures: dict[str, Any] = {}
        self.sql: dict[str, Any] = {}
        self.streams: list[dict[str, Any]] = []
        self.ttft: dict[str, dict[str, list[float]]] = {}
        self.rest: list[dict[str, Any]] = []
        self.server: Server | None = None
        # The websocket frame field of the message: ``text`` before issue 17, ``message`` after.
        self.frame_field = "message"


# --- clients -----------------------------------------------------------------------------------


async def ws_turns(side: Side, chain: str, turns: int) -> list[float]:
    """Seconds from sending to the first ``delta``, for ``turns`` later turns on one socket."""
    assert side.server is not None
    fx = side.fixtures
    times: list[float] = []
    async with connect(
        f"ws://127.0.0.1:{side.server.port}/ws/chat/{chain}/",
        origin=side.server.url,  # type: ignore[arg-type]
        additional_headers={"Cookie": fx["cookie"]},
        proxy=None,
        compression=None,
    ) as ws:
        conversation = None
        for i in range(turns + 1):  # the first turn starts the conversation: not counted
            frame: dict[str, Any] = {"type": "message", side.frame_field: f"Question {i}?"}
            if conversation:
                frame["conversation_id"] = conversation
            while True:
                sent = time.perf_counter()
                await ws.send(json.dumps(frame))
                first, text, busy = None, "", False
                while True:
                    event = json.loads(await asyncio.wait_for(ws.recv(), 30))
                    kind = event["type"]
                    if kind == "delta":
                        first = first or time.perf_counter()
                        text += event["text"]
                    elif kind == "start":
                        conversation = event.get("conversation_id") or conversation
                    elif kind == "error" and event.get("code") == "busy":
                        busy = True  # the previous turn's task had not ended yet: send again
                        break
                    elif kind in ("error", "done"):
                        if kind == "error" or text != fx["answer"] or first is None:
                            raise SystemExit(f"{side.name}: websocket turn failed: {event}")
                        break
                if not busy:
                    break
                await asyncio.sleep(0.002)
            if i:
                times.append(first - sent)
            # The consumer announces the conversation once the turn's task ends; after that
            # frame the socket takes the next message (a missing one only costs the timeout).
            with contextlib.suppress(TimeoutError):
                while json.loads(await asyncio.wait_for(ws.recv(), 2))["type"] != "conversation":
                    pass
    return times


async def sse_turns(side: Side, chain: str, turns: int) -> list[float]:
    """Seconds from sending to the first ``delta`` event, for ``turns`` later SSE turns."""
    assert side.server is not None
    fx = side.fixtures
    headers = {"Authorization": f"Token {fx['tokens'][0]}", "Accept": "text/event-stream"}
    times: list[float] = []
    async with httpx.AsyncClient(base_url=side.server.url, headers=headers, timeout=30) as client:
        conversation = None
        for i in range(turns + 1):
            body: dict[str, Any] = {"message": f"Question {i}?"}
            if conversation:
                body["conversation_id"] = conversation
            first, text = None, ""
            sent = time.perf_counter()
            async with client.stream("POST", f"/api/chains/{chain}/stream/", json=body) as answer:
                if answer.status_code != 200:
                    await answer.aread()
                    raise SystemExit(f"{side.name}: SSE {answer.status_code}: {answer.text}")
                async for line in answer.aiter_lines():
                    if not line.startswith("data: "):
                        continue
                    event = json.loads(line[6:])
                    if event["type"] == "delta":
                        first = first or time.perf_counter()
                        text += event["text"]
                    elif event["type"] == "start":
                        conversation = event.get("conversation_id") or conversation
                    elif event["type"] == "error":
                        raise SystemExit(f"{side.name}: SSE turn failed: {event}")
            if text != fx["answer"] or first is None:
                raise SystemExit(f"{side.name}: SSE answer {text!r} differs from the script")
            if i:
                times.append(first - sent)
    return times


async def floor_turns(server: Server, path: str, turns: int) -> list[float]:
    """Seconds from sending to the first ``delta`` event of a floor server (``_floors.py``)."""
    times: list[float] = []
    async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        for i in range(turns + 1):
            first = None
            sent = time.perf_counter()
            async with client.stream("POST", path, json={"message": f"Question {i}?"}) as answer:
                async for line in answer.aiter_lines():
                    if first is None and line.startswith("event: delta"):
                        first = time.perf_counter()
            if first is None:
                raise SystemExit(f"floor {path}: no delta event ({answer.status_code})")
            if i:
                times.append(first - sent)
    return times


async def floor_ws_turns(server: Server, path: str, turns: int) -> list[float]:
    """Seconds from sending a frame to the first ``delta`` frame of the bare ASGI floor's
    websocket, on one socket as :func:`ws_turns` does."""
    times: list[float] = []
    async with connect(f"ws://127.0.0.1:{server.port}{path}", proxy=None, compression=None) as ws:
        for i in range(turns + 1):
            first = None
            sent = time.perf_counter()
            await ws.send(json.dumps({"type": "message", "message": f"Question {i}?"}))
            while (kind := json.loads(await asyncio.wait_for(ws.recv(), 30))["type"]) != (
                "conversation"
            ):
                if first is None and kind == "delta":
                    first = time.perf_counter()
            if first is None:
                raise SystemExit("websocket floor: no delta frame")
            if i:
                times.append(first - sent)
    return times


#: The floors of row 5: server, path, transport and label, by name.
FLOORS = {
    "sse_asgi": ("asgi", "/", "sse", "SSE: bare ASGI app under daphne"),
    "sse_django": ("django", "/floor/", "sse", "SSE: async Django view, site middleware"),
    "websocket_asgi": ("asgi", "/", "websocket", "websocket: bare ASGI app under daphne"),
}


async def rest_run(side: Side, chain: str, clients: int, seconds: float) -> dict[str, Any]:
    """``clients`` clients posting ``call`` turns one after another for ``seconds``."""
    server = side.server
    assert server is not None
    latencies: list[float] = []
    window: dict[str, float] = {}
    started = asyncio.Event()

    async def client(token: str) -> None:
        headers = {"Authorization": f"Token {token}"}
        async with httpx.AsyncClient(base_url=server.url, headers=headers, timeout=30) as http:
            conversation = None
            turn = 0

            async def call() -> float:
                nonlocal conversation, turn
                body: dict[str, Any] = {"message": f"Question {turn}?"}
                if conversation:
                    body["conversation_id"] = conversation
                turn += 1
                sent = time.perf_counter()
                answer = await http.post(f"/api/chains/{chain}/call/", json=body)
                if answer.status_code != 200:
                    raise SystemExit(f"{side.name}: call {answer.status_code}: {answer.text}")
                conversation = answer.json()["conversation_id"]
                return time.perf_counter() - sent

            for _ in range(2):  # warm-up: connection open, conversation started
                await call()
            await started.wait()
            while time.perf_counter() < window["end"]:
                latency = await call()
                if time.perf_counter() <= window["end"]:
                    latencies.append(latency)

    tasks = [asyncio.create_task(client(t)) for t in side.fixtures["tokens"][:clients]]
    await asyncio.sleep(0.5)  # every client past its warm-up
    cpu, client_cpu = server.cpu_seconds(), time.process_time()
    window["start"] = time.perf_counter()
    window["end"] = window["start"] + seconds
    started.set()
    await asyncio.gather(*tasks)
    cpu = server.cpu_seconds() - cpu
    client_cpu = time.process_time() - client_cpu
    wall = time.perf_counter() - window["start"]
    return {
        "turns": len(latencies),
        "turns_per_s": len(latencies) / seconds,
        "latency_p50_ms": percentile(latencies, 0.5) * 1e3,
        "latency_p95_ms": percentile(latencies, 0.95) * 1e3,
        "server_cpu_pct": 100 * cpu / wall,
        "client_cpu_pct": 100 * client_cpu / wall,
    }


async def serve_and_measure(
    sides: list[Side], floors: dict[str, Server], args: argparse.Namespace
) -> dict[str, list[float]]:
    """Rows 2 and 3 against both servers, interleaved; and the floors (ours only) between
    them: the seconds to their first delta."""
    per_block = max(1, args.turns // args.blocks)
    floor_times: dict[str, list[float]] = {name: [] for name in FLOORS}
    for side in sides:
        side.ttft = {t: {"memory": [], "bare": []} for t in ("websocket", "sse")}
    for _ in range(args.blocks):
        for name, (server_name, path, transport, _) in FLOORS.items():
            measure = floor_ws_turns if transport == "websocket" else floor_turns
            floor_times[name] += await measure(floors[server_name], path, per_block)
        for side in sides:
            fx = side.fixtures
            for chain in ("memory", "bare"):
                slug = fx[f"{chain}_chain"]
                side.ttft["websocket"][chain] += await ws_turns(side, slug, per_block)
                side.ttft["sse"][chain] += await sse_turns(side, slug, per_block)
    for _ in range(args.rest_runs):
        for side in sides:
            run = await rest_run(
                side, side.fixtures["memory_chain"], args.concurrency, args.seconds
            )
            side.rest.append(run)
    return floor_times


# --- figures -----------------------------------------------------------------------------------


def side_results(side: Side) -> dict[str, Any]:
    keys = [k for k in side.streams[0] if isinstance(side.streams[0][k], float)]
    stream = {k: statistics.median(s[k] for s in side.streams) for k in keys}
    stream.update(sizes=side.streams[0]["sizes"], rounds=len(side.streams))
    model_first_ms = stream["bare_first_chunk_us"] / 1e3
    ttft: dict[str, Any] = {"model_first_chunk_ms": model_first_ms}
    for transport, chains in side.ttft.items():
        ttft[transport] = {}
        for chain, seconds in chains.items():
            ms = [s * 1e3 for s in seconds]
            ttft[transport][chain] = {
                "turns": len(ms),
                "p50_ms": percentile(ms, 0.5),
                "p95_ms": percentile(ms, 0.95),
                "above_model_p50_ms": percentile(ms, 0.5) - model_first_ms,
                "above_model_p95_ms": percentile(ms, 0.95) - model_first_ms,
            }
    runs = side.rest
    rest = {
        "concurrency": None,
        "turns_per_s": statistics.median(r["turns_per_s"] for r in runs),
        "latency_p50_ms": statistics.median(r["latency_p50_ms"] for r in runs),
        "latency_p95_ms": statistics.median(r["latency_p95_ms"] for r in runs),
        "server_cpu_pct": statistics.median(r["server_cpu_pct"] for r in runs),
        "client_cpu_pct": statistics.median(r["client_cpu_pct"] for r in runs),
        "runs": runs,
    }
    return {
        "tree": str(side.tree),
        "sql": {
            k: {n: v[n] for n in ("statements", "commits", "hops")} for k, v in side.sql.items()
        },
        "sql_statements": {k: v["sql"] for k, v in side.sql.items()},
        "stream": stream,
        "ttft": ttft,
        "rest": rest,
    }


def compare(ours: dict[str, Any], before: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The rows the summary prints: what, ours, before, ratio, target, met."""

    def ratio(a: float, b: float | None) -> float | None:
        return a / b if b else None

    rows = []
    for turn in ("first", "later"):
        o = ours["sql"][turn]
        b = before["sql"][turn] if before else None
        met = None
        if turn == "later":
            met = (
                o["statements"] <= TARGETS["statements"]
                and o["commits"] <= TARGETS["commits"]
                and o["hops"] <= TARGETS["hops"]
            )
        rows.append(
            {
                "what": f"SQL statements / commits / thread hops, {turn} turn",
                "ours": f"{o['statements']} / {o['commits']} / {o['hops']}",
                "before": f"{b['statements']} / {b['commits']} / {b['hops']}" if b else "—",
                "ratio": ratio(o["statements"], b["statements"] if b else None),
                "target": (
                    f"≤ {TARGETS['statements']} / {TARGETS['commits']} / ≤ {TARGETS['hops']}"
                    if turn == "later"
                    else ""
                ),
                "met": met,
            }
        )
    for transport, label in (("websocket", "websocket"), ("sse", "SSE")):
        for chain in ("memory", "bare"):
            o = ours["ttft"][transport][chain]
            b = before["ttft"][transport][chain] if before else None
            rows.append(
                {
                    "what": f"{label} time to first token above the model, "
                    f"{'memory chain' if chain == 'memory' else 'no advisors'}, p50 / p95 ms",
                    "ours": f"{o['above_model_p50_ms']:.2f} / {o['above_model_p95_ms']:.2f}",
                    "before": f"{b['above_model_p50_ms']:.2f} / {b['above_model_p95_ms']:.2f}"
                    if b
                    else "—",
                    "ratio": ratio(o["above_model_p50_ms"], b["above_model_p50_ms"] if b else None),
                    "target": "≤ 3 ms p50" if chain == "memory" else "",
                    "met": o["above_model_p50_ms"] <= TARGETS["ttft_p50_ms"]
                    if chain == "memory"
                    else None,
                }
            )
    for name, (_, _, transport, label) in FLOORS.items():
        floor = ours.get("floors", {}).get(name)
        if floor:
            unit = "frame" if transport == "websocket" else "event"
            rows.append(
                {
                    "what": f"floor: time to first delta {unit}, {label}, p50 / p95 ms",
                    "ours": f"{floor['p50_ms']:.2f} / {floor['p95_ms']:.2f}",
                    "before": "—",
                    "ratio": None,
                    "target": "",
                    "met": None,
                }
            )
    o, b = ours["stream"], before["stream"] if before else None
    rows.append(
        {
            "what": "in-process later stream_turn to first delta (the service's share), ms",
            "ours": f"{o['stream_turn_later_first_delta_us'] / 1e3:.2f}",
            "before": f"{b['stream_turn_later_first_delta_us'] / 1e3:.2f}" if b else "—",
            "ratio": ratio(
                o["stream_turn_later_first_delta_us"],
                b["stream_turn_later_first_delta_us"] if b else None,
            ),
            "target": "",
            "met": None,
        }
    )
    o, b = ours["rest"], before["rest"] if before else None
    rows.append(
        {
            "what": f"REST call turns/s, one process, memory chain, concurrency {o['concurrency']}",
            "ours": f"{o['turns_per_s']:.0f}",
            "before": f"{b['turns_per_s']:.0f}" if b else "—",
            "ratio": ratio(o["turns_per_s"], b["turns_per_s"] if b else None),
            "target": "≥ 100",
            "met": o["turns_per_s"] >= TARGETS["turns_per_s"],
        }
    )
    rows.append(
        {
            "what": "… its latency p50 / p95 ms, server CPU % (of one core)",
            "ours": f"{o['latency_p50_ms']:.1f} / {o['latency_p95_ms']:.1f}, "
            f"{o['server_cpu_pct']:.0f}",
            "before": f"{b['latency_p50_ms']:.1f} / {b['latency_p95_ms']:.1f}, "
            f"{b['server_cpu_pct']:.0f}"
            if b
            else "—",
            "ratio": None,
            "target": "",
            "met": None,
        }
    )
    o, b = ours["stream"], before["stream"] if before else None
    rows.append(
        {
            "what": "stream µs per chunk per advisor, service observers (engine only)",
            "ours": f"{o['service_per_chunk_per_advisor_us']:.2f} "
            f"({o['engine_per_chunk_per_advisor_us']:.2f})",
            "before": f"{b['service_per_chunk_per_advisor_us']:.2f} "
            f"({b['engine_per_chunk_per_advisor_us']:.2f})"
            if b
            else "—",
            "ratio": ratio(
                o["service_per_chunk_per_advisor_us"],
                b["service_per_chunk_per_advisor_us"] if b else None,
            ),
            "target": "≤ 2 µs",
            "met": o["service_per_chunk_per_advisor_us"] <= TARGETS["per_chunk_per_advisor_us"],
        }
    )
    rows.append(
        {
            "what": "in-process later call turn µs (core chain's call)",
            "ours": f"{o['call_turn_us']:,.0f} ({o['engine_call_us']:,.0f})",
            "before": f"{b['call_turn_us']:,.0f} ({b['engine_call_us']:,.0f})" if b else "—",
            "ratio": ratio(o["call_turn_us"], b["call_turn_us"] if b else None),
            "target": "",
            "met": None,
        }
    )
    return rows


def report(results: dict[str, Any]) -> None:
    ours, before = results["ours"], results["before"]
    print(f"\n{'figure':74} {'ours':>16} {'before':>16} {'ratio':>6}  {'target':14} {'':6}")
    for row in results["rows"]:
        ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "—"
        met = "" if row["met"] is None else ("met" if row["met"] else "MISSED")
        print(
            f"{row['what']:74} {row['ours']:>16} {row['before']:>16} {ratio:>6}  "
            f"{row['target'] or '—':14} {met}"
        )
    print("\ntime to first token as measured (ms, p50 / p95; the model's own first chunk: ", end="")
    print(f"{ours['ttft']['model_first_chunk_ms'] * 1e3:.0f} µs)")
    for transport in ("websocket", "sse"):
        for chain in ("memory", "bare"):
            cells = []
            for side in (ours, before):
                if side:
                    t = side["ttft"][transport][chain]
                    cells.append(f"{t['p50_ms']:7.2f} / {t['p95_ms']:7.2f} ({t['turns']} turns)")
            print(f"  {transport:9} {chain:7} " + "   ".join(cells))
    print("\nstream (in-process, µs)          per chunk  first chunk  short / long answer")
    for name, label in (("service", "stream_turn"), ("engine", "core chain"), ("bare", "model")):
        for side_name, side in (("ours", ours), ("before", before)):
            if side:
                s = side["stream"]
                print(
                    f"  {side_name:7} {label:22} {s[f'{name}_per_chunk_us']:9.2f} "
                    f"{s[f'{name}_first_chunk_us']:12.0f}  {s[f'{name}_small_us']:,.0f} / "
                    f"{s[f'{name}_large_us']:,.0f}"
                )
    print("\nREST runs (turns/s, server CPU %, client CPU %): ", end="")
    print(
        "; ".join(
            f"{name} "
            + ", ".join(
                f"{r['turns_per_s']:.0f} ({r['server_cpu_pct']:.0f}%, "
                f"client {r['client_cpu_pct']:.0f}%)"
                for r in s["rest"]["runs"]
            )
            for name, s in (("ours", ours), ("before", before))
            if s
        )
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--baseline", default=BASELINE_REF, help="commit of 'before' ('none': our side only)"
    )
    parser.add_argument("--ours", help="measure this commit instead of the working tree")
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--turns", type=int, default=200, help="TTFT turns per transport and chain")
    parser.add_argument("--blocks", type=int, default=4, help="interleaved blocks of those turns")
    parser.add_argument("--concurrency", type=int, default=4, help="REST clients at once")
    parser.add_argument("--seconds", type=float, default=4.0, help="per REST run")
    parser.add_argument("--rest-runs", type=int, default=3, help="REST runs per side")
    parser.add_argument("--small", type=int, default=50, help="chunks of the short answer")
    parser.add_argument("--large", type=int, default=1000, help="chunks of the long answer")
    parser.add_argument("--repeats", type=int, default=7, help="stream turns per size and round")
    parser.add_argument("--rounds", type=int, default=3, help="in-process rounds per side")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    baseline = None if args.baseline.lower() == "none" else args.baseline
    info = machine()
    began = time.perf_counter()
    print(f"# turn pipeline — {describe(info)}")
    ours_commit = git("rev-parse", args.ours or "HEAD")
    dirty = args.ours is None and bool(git("status", "--porcelain", "--", "advisors_app"))
    print(
        f"# ours: {'the working tree at ' if args.ours is None else ''}{ours_commit[:10]}"
        + (" with uncommitted changes in advisors_app/" if dirty else "")
        + (
            f"; before: {baseline} ({git('rev-parse', baseline)[:10]}), a temporary worktree"
            if baseline
            else "; before: not measured (--baseline none)"
        )
    )
    print(
        "# chain: SafeGuard + MessageChatMemory (10) + SimpleLogger, scripted model, 8 chunks; "
        f"{args.turns} TTFT turns per case in {args.blocks} blocks; REST {args.rest_runs} × "
        f"{args.seconds:g} s at concurrency {args.concurrency}; streams of {args.small} and "
        f"{args.large} chunks, {args.repeats} × {args.rounds} rounds",
        flush=True,
    )
    url = server_url(args.database_url)
    sides: list[Side] = []
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="turnbench-")))
        wanted = [("ours", args.ours)] + ([("before", baseline)] if baseline else [])
        for name, ref in wanted:
            tree = stack.enter_context(code_tree(ref, scratch))
            db = stack.enter_context(database(url, f"turnbench_{name}_{os.getpid()}"))
            sides.append(Side(name, tree, db, scratch))
        if baseline:
            sides[1].frame_field = "text"
        for round_ in range(args.rounds):
            for side in sides:
                steps = "setup,sql,stream" if round_ == 0 else "stream"
                done = worker(side, steps, args)
                if round_ == 0:
                    side.fixtures, side.sql = done["setup"], done["sql"]
                side.streams.append(done["stream"])
            print(f"in-process round {round_ + 1} of {args.rounds} done", flush=True)
        for side in sides:
            side.server = Server(side).start()
            stack.callback(side.server.stop)
        floors: dict[str, Server] = {}
        site = "advisorsite.asgi:application"
        for name, app, env in (
            ("asgi", "_floors:application", {}),
            ("django", site, {"TURNBENCH_URLCONF": "_floors"}),
        ):
            server = Server(sides[0], app, f"floor-{name}", env).start()
            stack.callback(server.stop)
            floors[name] = server
        floor_times = asyncio.run(serve_and_measure(sides, floors, args))
    ours = side_results(sides[0])
    ours["floors"] = {
        name: {
            "turns": len(seconds),
            "p50_ms": percentile([t * 1e3 for t in seconds], 0.5),
            "p95_ms": percentile([t * 1e3 for t in seconds], 0.95),
        }
        for name, seconds in floor_times.items()
    }
    before = side_results(sides[1]) if baseline else None
    for side in (ours, before):
        if side:
            side["rest"]["concurrency"] = args.concurrency
    results = {
        "ours_commit": ours_commit,
        "ours_working_tree": args.ours is None,
        "ours_uncommitted_changes": dirty,
        "baseline_ref": baseline,
        "baseline_commit": git("rev-parse", baseline) if baseline else None,
        "targets": TARGETS,
        "ours": ours,
        "before": before,
        "seconds": time.perf_counter() - began,
    }
    results["rows"] = compare(ours, before)
    report(results)
    print(f"\n{results['seconds']:.0f} s")
    # The database URL may hold a password: the parameters only say where the server came from.
    parameters = {k: v for k, v in vars(args).items() if k != "database_url"}
    parameters["database"] = "given" if args.database_url else "embedded, throwaway"
    write_json(args.json, "turn_pipeline", parameters, results, info)
    return results


if __name__ == "__main__":
    main()
