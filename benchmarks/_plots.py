"""The plots of ``run_all.py``: scaling curves of memory and vector search.

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
    if vector and "hnsw_p99_ms" in vector["results"].get("no_filter", {}):
        res, params = vector["results"], vector["parameters"]
        sizes = res.get("sizes") or {str(params["rows"]): res}
        x = [int(n) for n in sizes]
        scenarios = (
            ("no_filter", "-", "no filter"),
            ("filter_1pct", "--", "1% filter"),
            ("filter_10pct", ":", "10% filter"),
        )
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
        for metric, name, color in (  # HNSW last: on top where it meets exact SQL
            ("exact_sql_p50_ms", "exact SQL (no index)", "tab:orange"),
            ("numpy_p50_ms", "numpy brute force", "tab:green"),
            ("hnsw_p50_ms", "HNSW (PgVectorStore)", "tab:blue"),
        ):
            for key, style, suffix in scenarios:
                left.plot(
                    x,
                    [s[key][metric] for s in sizes.values()],
                    style,
                    marker="o",
                    color=color,
                    label=f"{name}, {suffix}",
                )
        left.axhline(10, color="tab:red", linestyle=":", label="target p50 10 ms")
        left.set(
            xscale="log",
            yscale="log",
            xlabel="rows (real MiniLM sentences, 384 dimensions)",
            ylabel="p50 ms, top-10",
            title="Search latency",
        )
        left.grid(True, which="both", alpha=0.3)
        left.legend(fontsize=6)
        for (key, style, name), color in zip(
            scenarios, ("tab:blue", "tab:purple", "tab:cyan"), strict=True
        ):
            right.plot(
                x,
                [s[key]["recall_at_10"] for s in sizes.values()],
                style,
                marker="o",
                color=color,
                label=name,
            )
        right.axhline(0.98, color="tab:red", linestyle=":", label="target 0.98 (no filter)")
        right.axhline(0.95, color="tab:orange", linestyle=":", label="target 0.95 (filtered)")
        right.set(
            xscale="log",
            ylim=(0.8, 1.01),
            xlabel="rows (real MiniLM sentences, 384 dimensions)",
            ylabel="recall@10 vs exact",
            title=f"HNSW recall@10 (m=16, ef_search={params.get('headline_ef_search', 40)})",
        )
        right.grid(True, which="both", alpha=0.3)
        right.legend(fontsize=7, loc="lower left")
        for ax in (left, right):
            ax.set_xticks(x, [f"{n:,}" for n in x])
            ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        written.append(_save(fig, folder / "vector_search.png"))
    return written


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path
