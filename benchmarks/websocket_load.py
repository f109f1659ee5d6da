"""Websocket load: N concurrent chats streaming from one live daphne server.

Starts the example site in daphne (``websocket_load_settings.py``) on a fresh test database,
with a chain whose scripted model emits ``--tokens`` tokens ``--interval`` seconds apart, opens
``--clients`` websockets (each a user with a session), sends one message on every socket at
once and reads every frame. Per run it prints:

- frames/s received (all sockets) and delta frames per chat;
- p50/p99 gap between consecutive delta frames of a chat (the streaming cadence), in ms;
- p50/p99 time from sending the message to the first delta, and p99 from the last delta to
  ``done`` (the turn's bookkeeping: transcript and call log), in ms;
- lost frames: chats whose received text differs from the scripted answer, and characters
  missing (a lost or reordered frame shows up here);
- the server's CPU time over the streaming phase (seconds, and % of one core).

Runs: the in-memory and the Redis channel layer (``REDIS_URL``, default the machine's
127.0.0.1:6379 in database 14, keys under a fresh prefix), each with delta coalescing (the
default 40 ms / 64 characters) and, as the peer measured in the same run, without it (one
frame per token, what a consumer that forwards every chunk sends). The last lines give the
ratios coalesced / per-token for frames and server CPU.

Run: ``.venv/bin/python benchmarks/websocket_load.py`` (``--clients 500`` for the big run,
``--clients 50,200,500`` for a scaling curve: coalesced at every count, the per-token peer at
the largest; ``--layers memory`` to skip Redis; ``--json PATH`` writes the results). With
``DATABASE_URL`` set it uses that server, otherwise a throwaway embedded PostgreSQL; either way
in a test database it drops at the end.
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
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "advisorsite.settings")
os.environ.setdefault("DJANGO_SECRET_KEY", "benchmark-only-not-secret")
if not os.environ.get("DATABASE_URL"):
    os.environ.setdefault("ADVISORS_EMBEDDED_DB", "throwaway")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from websockets.asyncio.client import ClientConnection, connect  # noqa: E402
from websockets.exceptions import ConnectionClosed  # noqa: E402

from advisors_app.models import ChatModelConfig  # noqa: E402
from benchmarks._common import describe, machine, write_json  # noqa: E402
from tests.factories import make_chain  # noqa: E402
from tests.helpers import database_url_for_subprocess  # noqa: E402
from tests.live_server import LiveServer  # noqa: E402

LOGS = ROOT / "var" / "benchmarks"


@dataclass
class Chat:
    """What one client saw."""

    sent: float = 0.0
    times: list[float] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    text: str = ""
    error: str = ""


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def run_clients(server: LiveServer, cookies: list[str], timeout: float) -> list[Chat]:
    """Open every socket, then send one message on all of them at once and read to ``done``.

    A socket the server closes or that stops answering for ``timeout`` seconds ends its chat
    with ``error`` set (it counts as lost); the run goes on.
    """
    sockets: list[ClientConnection] = []
    for cookie in cookies:  # sequential opens: the handshake is not what is measured
        sockets.append(
            await connect(
                f"{server.ws_url}/ws/chat/load/",
                origin=server.url,  # type: ignore[arg-type]
                additional_headers={"Cookie": cookie},
                proxy=None,
                compression=None,
                max_queue=None,
            )
        )

    async def chat(ws: ClientConnection) -> Chat:
        result = Chat(sent=time.perf_counter())
        try:
            await ws.send(json.dumps({"type": "message", "text": "Tell me a story"}))
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), timeout))
                if frame["type"] == "conversation":
                    continue
                result.times.append(time.perf_counter())
                result.kinds.append(frame["type"])
                if frame["type"] == "delta":
                    result.text += frame["text"]
                if frame["type"] in ("done", "error"):
                    if frame["type"] == "error":
                        result.error = frame["code"]
                    return result
        except (TimeoutError, OSError, ConnectionClosed) as exc:
            result.error = f"{type(exc).__name__} {getattr(exc, 'rcvd', '') or ''}".strip()
            return result

    try:
        return await asyncio.gather(*(chat(ws) for ws in sockets))
    finally:
        await asyncio.gather(*(ws.close() for ws in sockets))


def measure(
    label: str, env: dict[str, str], cookies: list[str], answer: str, args: argparse.Namespace
) -> dict[str, Any]:
    server = LiveServer(
        LOGS / f"websocket_load-{label.replace(' ', '_')}.log",
        daphne_args=("--access-log", "/dev/null"),
        DJANGO_SETTINGS_MODULE="benchmarks.websocket_load_settings",
        DATABASE_URL=database_url_for_subprocess(),
        **env,
    )
    with server:
        # One warm-up chat loads the chain and opens the database connection.
        asyncio.run(run_clients(server, cookies[:1], args.timeout))
        cpu_before = server.cpu_seconds()
        started = time.perf_counter()
        chats = asyncio.run(run_clients(server, cookies, args.timeout))
        wall = time.perf_counter() - started
        cpu = server.cpu_seconds() - cpu_before
    frames = sum(len(c.times) for c in chats)
    gaps = [
        b - a
        for c in chats
        for (a, kind_a), (b, kind_b) in itertools.pairwise(zip(c.times, c.kinds, strict=True))
        if kind_a == kind_b == "delta"
    ]
    finish = [
        c.times[-1] - c.times[-2] for c in chats if len(c.times) > 1 and c.kinds[-1] == "done"
    ]
    first = [c.times[c.kinds.index("delta")] - c.sent for c in chats if "delta" in c.kinds]
    lost = [c for c in chats if c.text != answer or c.error]
    return {
        "label": label,
        "chats": len(chats),
        "frames": frames,
        "frames_per_s": frames / wall,
        "deltas_per_chat": statistics.mean(c.kinds.count("delta") for c in chats),
        "gap_p50": percentile(gaps, 0.5) * 1e3,
        "gap_p99": percentile(gaps, 0.99) * 1e3,
        "first_p50": percentile(first, 0.5) * 1e3,
        "first_p99": percentile(first, 0.99) * 1e3,
        "finish_p99": percentile(finish, 0.99) * 1e3,
        "lost_chats": len(lost),
        "missing_chars": sum(max(len(answer) - len(c.text), 0) for c in lost),
        "errors": sorted({c.error for c in chats if c.error}),
        "wall": wall,
        "cpu": cpu,
    }


def redis_answers(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--clients", default="100", help="concurrent chats, or a list (e.g. 500, or 50,200,500)"
    )
    parser.add_argument("--tokens", type=int, default=200, help="tokens per scripted answer")
    parser.add_argument("--interval", type=float, default=0.01, help="seconds between tokens")
    parser.add_argument("--layers", default="memory,redis", help="memory, redis or both")
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/14")
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait per frame")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args()
    counts = sorted({int(c) for c in args.clients.split(",") if c.strip()})
    info = machine()
    print(f"# websocket load — {describe(info)}")
    layers = [layer.strip() for layer in args.layers.split(",") if layer.strip()]
    if "redis" in layers and not redis_answers(args.redis_url):
        print(f"no Redis at {args.redis_url}: measuring the in-memory layer only")
        layers = [layer for layer in layers if layer != "redis"]

    tokens = [f"tok{i:04d} " for i in range(args.tokens)]
    answer = "".join(tokens)
    old_name = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        model = ChatModelConfig.objects.create(
            slug="load-model",
            provider="scripted",
            settings={"responses": [tokens], "repeat": True, "chunk_delay": args.interval},
        )
        make_chain("load", model=model)
        users = get_user_model().objects.bulk_create(
            get_user_model()(username=f"load{i}") for i in range(counts[-1])
        )
        cookies = []
        for user in users:
            client = Client()
            client.force_login(user)
            cookies.append(
                f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"
            )
        print(
            f"{', '.join(map(str, counts))} concurrent chats; scripted answer of {args.tokens} "
            f"tokens, one every {args.interval * 1e3:.0f} ms ({len(answer)} characters); "
            f"{os.cpu_count()} CPUs\n"
        )
        results = []
        for layer in layers:
            env = {}
            if layer == "redis":
                env = {
                    "REDIS_URL": args.redis_url,
                    "BENCH_REDIS_PREFIX": f"bench-{uuid.uuid4().hex}",
                }
            runs = [(n, 40, "coalesced") for n in counts] + [(counts[-1], 0, "per token")]
            for clients, coalesce, mode in runs:
                label = f"{layer} {mode} {clients}"
                env_run = {**env, "BENCH_COALESCE_MS": str(coalesce)}
                result = measure(label, env_run, cookies[:clients], answer, args)
                results.append({**result, "layer": layer, "mode": mode, "clients": clients})
                print_row(results[-1], header=len(results) == 1)
        print()
        for layer in layers:
            ours = next(
                r
                for r in results
                if (r["layer"], r["mode"], r["clients"]) == (layer, "coalesced", counts[-1])
            )
            peer = next(r for r in results if (r["layer"], r["mode"]) == (layer, "per token"))
            print(
                f"{layer}, {counts[-1]} chats: coalesced / per token = "
                f"{ours['frames'] / peer['frames']:.2f}x frames, "
                f"{ours['cpu'] / peer['cpu']:.2f}x server CPU, "
                f"{ours['gap_p99'] / peer['gap_p99']:.2f}x p99 gap"
            )
        parameters = {
            "clients": counts,
            "tokens": args.tokens,
            "interval_s": args.interval,
            "layers": layers,
        }
        write_json(args.json, "websocket_load", parameters, {"runs": results}, info)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)


def print_row(r: dict, header: bool) -> None:
    if header:
        print(
            f"{'run':24} {'frames/s':>9} {'deltas/chat':>11} {'gap p50':>8} {'gap p99':>8} "
            f"{'1st p50':>8} {'1st p99':>8} {'done p99':>9} {'lost':>10} {'wall s':>7} "
            f"{'CPU s':>6} {'CPU %':>6}"
        )
    lost = f"{r['lost_chats']}/{r['chats']}"
    print(
        f"{r['label']:24} {r['frames_per_s']:9.0f} {r['deltas_per_chat']:11.1f} "
        f"{r['gap_p50']:7.1f}ms {r['gap_p99']:7.1f}ms {r['first_p50']:7.0f}ms "
        f"{r['first_p99']:7.0f}ms {r['finish_p99']:7.0f}ms {lost:>10} {r['wall']:7.2f} "
        f"{r['cpu']:6.2f} {100 * r['cpu'] / r['wall']:6.0f}"
        + (
            f"  errors: {', '.join(r['errors'])}; {r['missing_chars']} chars missing"
            if r["lost_chats"]
            else ""
        )
    )


if __name__ == "__main__":
    main()
