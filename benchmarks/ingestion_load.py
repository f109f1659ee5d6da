"""Ingestion load: a small REST request while a task worker ingests a large upload, vs idle.

Issue 18: ingestion ran inside the web request (a 470 KB text took 173 s there, and other users
waited seconds behind it); now a task worker (``manage.py db_worker``) does it. This measures
what another user gets meanwhile: one daphne process serving the example site and one worker,
both on the same PostgreSQL; a client sends a small REST request (``GET /api/collections/kb/``,
authenticated by token) one after another, and we take p50/p95 latency

1. idle, before the upload;
2. while the worker ingests a large upload (``--kb`` KB of varied English text, about as long
   as the tester's, split and embedded with the real all-MiniLM-L6-v2), for ``--seconds``,
   once with the worker at ``nice 10`` (as ``scripts/demo.sh`` starts it) and once at
   ``nice 0`` (a worker started by hand), each with a worker and an upload of its own;
3. idle again, after the workers are stopped.

The peer is the idle figure of the same run (both idle phases pooled). The issue's target: the
request is slowed by no more than the worker's share of the CPU, i.e. the loaded p95 is at most
``1 / (1 - share)`` times the idle p95, where ``share`` is the worker's CPU time (with its
children) over the wall time of phase 2 and the cores of the machine.

Shortcuts, said where they matter: only the first ``--seconds`` of the ingestion are measured
(the whole job takes minutes; the worker is then stopped, and the job fails as interrupted);
the client is this process, on the same cores, one request at a time; ``DEBUG`` is off and
the upload rate and quotas are off (``ingestion_load_settings.py``).

Run: ``.venv/bin/python benchmarks/ingestion_load.py`` (about a minute). With
``--database-url`` or ``DATABASE_URL`` it uses that server, otherwise a throwaway embedded
PostgreSQL; either way in a database it drops at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from benchmarks._common import header, machine, percentile, write_json  # noqa: E402
from benchmarks.turn_pipeline import database, server_url  # noqa: E402

LOGS = ROOT / "var" / "benchmarks"

_WORDS = (
    *("refund", "shipping", "order", "invoice", "customer", "warehouse", "parcel", "delivery"),
    *("return", "policy", "account", "payment", "card", "bank", "transfer", "address", "label"),
    *("courier", "weekday", "holiday", "support", "ticket", "answer", "question", "product"),
    *("price", "discount", "coupon", "member", "newsletter", "contract", "notice", "period"),
)


def large_text(kilobytes: int, seed: int = 18) -> str:
    """About ``kilobytes`` KB of varied sentences in paragraphs (so every chunk is new)."""
    rng = random.Random(seed)
    paragraphs, size = [], 0
    while size < kilobytes * 1024:
        sentences = [
            " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 16))).capitalize() + "."
            for _ in range(rng.randint(3, 7))
        ]
        paragraphs.append(" ".join(sentences))
        size += len(paragraphs[-1]) + 2
    return "\n\n".join(paragraphs)


def child_env(database_url: str) -> dict[str, str]:
    drop = {"PYTHONPATH", "DJANGO_SETTINGS_MODULE", "REDIS_URL", "ADVISORS_EMBEDDED_DB"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env.update(
        PYTHONPATH=os.pathsep.join([str(BENCH), str(ROOT)]),
        DJANGO_SETTINGS_MODULE="ingestion_load_settings",
        DATABASE_URL=database_url,
        DJANGO_SECRET_KEY="benchmark-only-not-secret",
        DJANGO_DEBUG="false",
    )
    return env


class Process:
    """A child process of the example site with its log in ``var/benchmarks/``."""

    def __init__(self, name: str, command: list[str], env: dict[str, str]) -> None:
        LOGS.mkdir(parents=True, exist_ok=True)
        self.log_path = LOGS / f"ingestion_load-{name}.log"
        self._log: IO[bytes] = self.log_path.open("wb")
        self.process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def cpu_seconds(self) -> float:
        """CPU time of the process and of its children it waited for (the PDF readers)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
        return ticks / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def setup(database_url: str) -> str:
    """Migrate, create a user with a token and a shared collection ``kb``; the token."""
    script = (
        "from django.core.management import call_command;"
        "call_command('migrate', verbosity=0);"
        "from django.contrib.auth import get_user_model;"
        "from rest_framework.authtoken.models import Token;"
        "from advisors_app.models import Collection;"
        "user = get_user_model().objects.create_user('bench', password='bench');"
        "Collection.objects.create(slug='kb', name='KB');"
        "print(Token.objects.create(user=user).key)"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=child_env(database_url),
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"setup failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout.strip().splitlines()[-1]


def start_server(env: dict[str, str], timeout: float = 60.0) -> tuple[Process, str]:
    server = Process(
        "daphne",
        [
            *(sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", "0"),
            *("--access-log", os.devnull, "advisorsite.asgi:application"),
        ],
        env,
    )
    marker = "Listening on TCP address 127.0.0.1:"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.process.poll() is None:
        text = server.log()
        if marker in text:
            return server, f"http://127.0.0.1:{int(text.split(marker, 1)[1].split()[0])}"
        time.sleep(0.05)
    server.stop()
    raise SystemExit(f"daphne did not start:\n{server.log()}")


def requests(client: httpx.Client, count: int | None, seconds: float | None) -> list[float]:
    """Latencies (s) of small requests sent one after another, ``count`` or for ``seconds``."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds if seconds else None
    while (count is None or len(latencies) < count) and (
        deadline is None or time.monotonic() < deadline
    ):
        started = time.perf_counter()
        answer = client.get("/api/collections/kb/")
        latencies.append(time.perf_counter() - started)
        if answer.status_code != 200:
            raise SystemExit(f"GET /api/collections/kb/ answered {answer.status_code}")
        time.sleep(0.01)  # a user's pace, not a load test
    return latencies


def stats(latencies: list[float]) -> dict[str, float]:
    return {
        "requests": len(latencies),
        "p50_ms": 1000 * percentile(latencies, 0.5),
        "p95_ms": 1000 * percentile(latencies, 0.95),
        "max_ms": 1000 * max(latencies),
    }


def loaded_phase(
    client: httpx.Client, env: dict[str, str], niceness: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Start a worker at ``niceness``, upload the large text, measure while it embeds."""
    command = [sys.executable, "manage.py", "db_worker", "--no-reload", "--no-startup-delay"]
    worker = Process(f"worker-nice{niceness}", ["nice", "-n", str(niceness), *command], env)
    try:
        text = large_text(args.kb, seed=niceness)
        posted = time.perf_counter()
        answer = client.post(
            "/api/documents/",
            json={"collection": "kb", "name": f"large-{niceness}.txt", "text": text},
        )
        post_seconds = time.perf_counter() - posted
        if answer.status_code != 202:
            raise SystemExit(f"upload answered {answer.status_code}: {answer.text}")
        job_url = answer.json()["url"]
        # The phase starts once the worker is embedding (it loads the model first).
        deadline = time.monotonic() + 120
        while (job := client.get(job_url).json())["total"] == 0:
            if job["status"] == "failed":
                raise SystemExit(f"the job failed: {job['errors']}")
            if time.monotonic() > deadline or worker.process.poll() is not None:
                raise SystemExit(f"the worker did not start the job:\n{worker.log()}")
            time.sleep(0.2)
        cpu_before, wall_before = worker.cpu_seconds(), time.monotonic()
        loaded = requests(client, None, args.seconds)
        cpu = worker.cpu_seconds() - cpu_before
        wall = time.monotonic() - wall_before
        job = client.get(job_url).json()
    finally:
        worker.stop()
    share = min(cpu / wall / (os.cpu_count() or 1), 0.99)
    return {
        "niceness": niceness,
        "latency": stats(loaded),
        "worker_cpu_seconds": cpu,
        "window_seconds": wall,
        "worker_share": share,
        "allowed_ratio": 1 / (1 - share),
        "upload_post_ms": 1000 * post_seconds,
        "upload_bytes": len(text.encode()),
        "job_done": job["done"],
        "job_total": job["total"],
    }


def measure(base_url: str, token: str, env: dict[str, str], args: argparse.Namespace) -> Any:
    headers = {"Authorization": f"Token {token}"}
    with httpx.Client(base_url=base_url, headers=headers, timeout=60) as client:
        requests(client, 20, None)  # warm-up: connections, caches
        idle_before = requests(client, args.idle, None)
        phases = [loaded_phase(client, env, niceness, args) for niceness in args.nice]
        idle_after = requests(client, args.idle, None)
    idle = stats(idle_before + idle_after)
    for phase in phases:
        phase["ratio_p95"] = phase["latency"]["p95_ms"] / idle["p95_ms"]
        phase["ratio_p50"] = phase["latency"]["p50_ms"] / idle["p50_ms"]
        phase["met"] = phase["ratio_p95"] <= phase["allowed_ratio"]
    return {
        "idle": idle,
        "idle_before": stats(idle_before),
        "idle_after": stats(idle_after),
        "phases": phases,
    }


def report(results: dict[str, Any]) -> None:
    print("| small REST request | requests | p50 ms | p95 ms | max ms | p95 / idle |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = [
        ("idle (before + after)", results["idle"], None),
        ("idle before", results["idle_before"], None),
        ("idle after", results["idle_after"], None),
    ]
    rows += [
        (f"during the ingestion, worker at nice {p['niceness']}", p["latency"], p["ratio_p95"])
        for p in results["phases"]
    ]
    for label, row, ratio in rows:
        print(
            f"| {label} | {row['requests']} | {row['p50_ms']:.2f} | {row['p95_ms']:.2f} "
            f"| {row['max_ms']:.1f} | {'—' if ratio is None else f'{ratio:.2f}×'} |"
        )
    for p in results["phases"]:
        print(
            f"nice {p['niceness']}: the upload of {p['upload_bytes'] / 1024:,.0f} KB answered 202 "
            f"in {p['upload_post_ms']:.0f} ms; in {p['window_seconds']:.0f} s the worker embedded "
            f"{p['job_done']:,} of {p['job_total']:,} chunks using "
            f"{100 * p['worker_share']:.0f}% of the machine's CPU, so the target is p95 ≤ "
            f"{p['allowed_ratio']:.2f}× idle: {'met' if p['met'] else 'MISSED'} "
            f"({p['ratio_p95']:.2f}×)"
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL"))
    parser.add_argument("--kb", type=int, default=470, help="size of the large upload, KB")
    parser.add_argument("--seconds", type=float, default=20.0, help="measured during ingestion")
    parser.add_argument("--idle", type=int, default=300, help="idle requests before and after")
    parser.add_argument(
        "--nice",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[10, 0],
        help="the worker's niceness in each loaded phase (demo.sh: 10)",
    )
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    info = machine()
    header(
        "ingestion load",
        "what another user's small REST request gets while a task worker embeds an upload "
        "(p50/p95 against the idle figure of the same run)",
        info,
    )
    print(
        f"# one daphne process + one db_worker; GET /api/collections/kb/ one at a time; "
        f"{args.idle} idle requests before and after, {args.seconds:g} s during the ingestion "
        f"of {args.kb} KB of text (the first {args.seconds:g} s of it only) with the worker at "
        f"nice {', then '.join(map(str, args.nice))}",
        flush=True,
    )
    url = server_url(args.database_url)
    with contextlib.ExitStack() as stack:
        stack.enter_context(tempfile.TemporaryDirectory(prefix="ingestbench-"))
        db = stack.enter_context(database(url, f"ingestbench_{os.getpid()}"))
        token = setup(db)
        env = child_env(db)
        server, base_url = start_server(env)
        stack.callback(server.stop)
        results = measure(base_url, token, env, args)
    report(results)
    parameters = {k: v for k, v in vars(args).items() if k not in ("json", "database_url")}
    write_json(args.json, "ingestion_load", parameters, results, info)
    return results


if __name__ == "__main__":
    main()
