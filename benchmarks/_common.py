"""Helpers shared by the benchmarks: the machine description, medians and the JSON result file.

Every benchmark prints its own table, headed by :func:`header` (the machine, its CPU pressure and
load average when the benchmark started, and one line saying what is measured), and, with
``--json PATH``, writes ``{"benchmark", "machine", "parameters", "results"}`` there;
``run_all.py`` collects the files.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "cpu_pressure",
    "describe",
    "header",
    "machine",
    "median",
    "percentile",
    "pressure_line",
    "write_json",
]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def cpu_pressure() -> dict[str, float] | None:
    """Linux PSI ``some`` line of ``/proc/pressure/cpu``: the share (%) of the last 10 s
    (``avg10``), 60 s (``avg60``) and 300 s (``avg300``) in which some runnable task waited
    for a core; ``None`` where the kernel does not report it."""
    try:
        first = Path("/proc/pressure/cpu").read_text().splitlines()[0]
        fields = dict(f.split("=") for f in first.split()[1:])
        return {k: float(fields[k]) for k in ("avg10", "avg60", "avg300")}
    except (OSError, IndexError, KeyError, ValueError):
        return None


def machine() -> dict[str, Any]:
    """What the numbers were measured on, including the load when the benchmark started.

    The load average and the CPU pressure show how much other work shared the cores.
    """
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    pressure = cpu_pressure()
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "load_average": load,
        "cpu_pressure_pct": pressure["avg60"] if pressure else None,
        "cpu_pressure_avg10_pct": pressure["avg10"] if pressure else None,
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def describe(info: dict[str, Any]) -> str:
    """One line for the head of a printed table."""
    load, pressure = info.get("load_average"), info.get("cpu_pressure_pct")
    return (
        f"{info['cpu']}, {info['cores']} cores, {info['memory_gib']} GiB, {info['os']}, "
        f"{info['python']}"
        + (f"; load average {load[0]:.2f} at start" if load else "")
        + (f", CPU pressure {pressure:.0f}%" if pressure is not None else "")
    )


def pressure_line(info: dict[str, Any] | None = None) -> str:
    """``CPU pressure some avg10 … avg60 …; load average …`` of ``info`` (default: now)."""
    info = info or machine()
    avg10, avg60 = info.get("cpu_pressure_avg10_pct"), info.get("cpu_pressure_pct")
    load = info.get("load_average")
    pressure = (
        f"CPU pressure (some) avg10 {avg10:.1f}%, avg60 {avg60:.1f}%"
        if avg10 is not None and avg60 is not None
        else "CPU pressure not reported by this kernel"
    )
    loads = f"load average {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}" if load else ""
    return f"{pressure}; {loads} on {info['cores']} cores" if loads else pressure


def header(title: str, measured: str, info: dict[str, Any]) -> None:
    """Print the head of a benchmark's output: its title and machine, the CPU pressure and
    load average when it started (other work on the cores moves every absolute figure), and
    one line saying what is measured."""
    print(f"# {title} — {describe(info)}")
    print(f"# {pressure_line(info)}")
    print(f"# Measures: {measured}")


def median(run: Callable[[], float], repeats: int) -> float:
    """Median of ``repeats`` results of ``run()`` (each one repetition's measurement)."""
    return statistics.median(run() for _ in range(repeats))


def percentile(values: Iterable[float], q: float) -> float:
    """Nearest-rank percentile, ``q`` in [0, 1]; ``nan`` for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def write_json(
    path: str | None,
    benchmark: str,
    parameters: dict[str, Any],
    results: dict[str, Any],
    machine_info: dict[str, Any] | None = None,
) -> None:
    """Write one benchmark's results (``path`` None: nothing); ``machine_info`` from its start."""
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "benchmark": benchmark,
        "machine": machine_info or machine(),
        "parameters": parameters,
        "results": results,
    }
    Path(path).write_text(json.dumps(payload, indent=2, default=str) + "\n")
