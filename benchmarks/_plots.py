"""The plots of ``run_all.py``: scaling curves of memory, vector search and websockets.

matplotlib with the Agg backend (no display), one PNG per benchmark, from the JSON results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def plots(data: dict[str, dict[str, Any] | None], folder: Path) -> list[Path]:
    """Draw the PNGs of the benchmarks present in ``data`` into ``folder``; their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    written = []
    memory = data.get("memory_window")
    if memory:
        res = memory["results"]
        fig, ax = plt.subplots(figsize=(6.4, 4))
        for key, label in (
            ("get", "window read (get)"),
            ("aget", "window read (aget)"),
            ("add", "append a turn (add)"),
            ("spring_read", "peer: Spring AI read (whole conversation)"),
        ):
            sizes = [int(s) for s in res[key]["ms"]]
            ax.plot(sizes, list(res[key]["ms"].values()), marker="o", label=label)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="messages in the conversation",
            ylabel="median ms per operation",
            title="Chat memory on PostgreSQL",
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        written.append(_save(fig, folder / "memory_scaling.png"))
    vector = data.get("vector_search")
    if vector:
        res = vector["results"]
        sizes = res.get("sizes") or {str(vector["parameters"]["rows"]): res}
        x = [int(n) for n in sizes]
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        for metric, name, color in (  # HNSW last: on top where it meets exact SQL
            ("exact_sql_p50_ms", "exact SQL (no index)", "tab:orange"),
            ("numpy_p50_ms", "numpy brute force", "tab:green"),
            ("hnsw_p50_ms", "HNSW (PgVectorStore)", "tab:blue"),
        ):
            for key, style, suffix in (
                ("no_filter", "-", ""),
                ("filter_1pct", "--", ", 1% filter"),
            ):
                left.plot(
                    x,
                    [s[key][metric] for s in sizes.values()],
                    style,
                    marker="o",
                    color=color,
                    label=name + suffix,
                )
        left.set(
            xscale="log",
            yscale="log",
            xlabel="rows (384 dimensions)",
            ylabel="p50 ms, top-10",
            title="Search latency",
        )
        left.grid(True, which="both", alpha=0.3)
        left.legend(fontsize=7)
        for key, style, name, color in (
            ("no_filter", "-", "no filter", "tab:blue"),
            ("filter_1pct", "--", "1% filter", "tab:purple"),
        ):
            right.plot(
                x,
                [s[key]["recall_at_10"] for s in sizes.values()],
                style,
                marker="o",
                color=color,
                label=f"50 rows per topic, {name}",
            )
        sparse = res.get("sparse")
        if sparse:
            value = sparse["no_filter"]["recall_at_10"]
            right.scatter(
                [sparse["rows"]],
                [value],
                marker="x",
                s=60,
                color="tab:red",
                label=f"2 rows per topic (harder): {value:.3f}",
                zorder=3,
            )
        right.axhline(0.95, color="tab:red", linestyle=":", label="target 0.95")
        right.set(
            xscale="log",
            ylim=(0.8, 1.01),
            xlabel="rows (384 dimensions)",
            ylabel="recall@10 vs exact",
            title="HNSW recall@10 (m=16, ef_search=40)",
        )
        right.grid(True, which="both", alpha=0.3)
        right.legend(fontsize=7, loc="lower left")
        for ax in (left, right):
            ax.set_xticks(x, [f"{n:,}" for n in x])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        written.append(_save(fig, folder / "vector_search.png"))
    ws = data.get("websocket_load")
    if ws:
        runs = ws["results"]["runs"]
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 4))
        for layer, color in (("memory", "tab:blue"), ("redis", "tab:red")):
            ours = sorted(
                (r for r in runs if r["layer"] == layer and r["mode"] == "coalesced"),
                key=lambda r: r["clients"],
            )
            peer = [r for r in runs if r["layer"] == layer and r["mode"] == "per token"]
            if not ours:
                continue
            x = [r["clients"] for r in ours]
            left.plot(
                x,
                [r["frames_per_s"] for r in ours],
                marker="o",
                color=color,
                label=f"{layer}, coalesced",
            )
            right.plot(
                x,
                [r["gap_p99"] for r in ours],
                marker="o",
                color=color,
                label=f"{layer}, coalesced",
            )
            for r in peer:
                left.scatter(
                    r["clients"],
                    r["frames_per_s"],
                    marker="x",
                    color=color,
                    label=f"{layer}, per token (peer)",
                )
                right.scatter(
                    r["clients"],
                    r["gap_p99"],
                    marker="x",
                    color=color,
                    label=f"{layer}, per token (peer)",
                )
        left.set(xlabel="concurrent chats", ylabel="frames/s received", title="Throughput")
        right.set(
            xlabel="concurrent chats",
            ylabel="p99 gap between deltas, ms",
            title="Streaming cadence",
        )
        for ax in (left, right):
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=8)
        written.append(_save(fig, folder / "websocket_load.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
