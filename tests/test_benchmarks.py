"""Smoke tests of ``benchmarks/``: the chain, turn and ingestion benchmarks at tiny sizes, and the
summary.

None needs the peers of ``requirements-bench.txt`` (CI does not install them): without
LangChain the chain benchmark measures our side only and says so; the turn benchmark runs
without its baseline worktree (``--baseline none``).
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks import chain_overhead, ingestion_load, run_all, turn_pipeline
from tests.helpers import database_url_for_subprocess


def test_chain_overhead_runs_at_tiny_sizes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "chain.json"
    tiny = ["--seconds", "0.005", "--repeats", "1", "--chunks", "8", "--streams", "1"]
    results = chain_overhead.main([*tiny, "--json", str(out)])

    assert results["call"]["ours_chain_us"] > results["call"]["ours_direct_us"] > 0
    assert results["stream"]["chunks"] == 8
    assert results["stream"]["ours_chain_per_chunk_us"] > 0
    assert results["micro"]["pass_through_call_us"] > 0
    written = json.loads(out.read_text())
    assert written["benchmark"] == "chain_overhead"
    assert written["machine"]["cores"] >= 1
    printed = capsys.readouterr().out
    assert "ours: ChatClient, 6 advisors" in printed
    if results["langchain_versions"] is None:
        assert "LangChain is not installed" in printed
    else:
        assert "overhead_ratio" in results["call"]


def test_turn_pipeline_runs_at_tiny_sizes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "turn.json"
    tiny = [
        *("--baseline", "none", "--turns", "2", "--blocks", "1", "--concurrency", "2"),
        *("--seconds", "0.3", "--rest-runs", "1", "--small", "4", "--large", "12"),
        *("--repeats", "1", "--rounds", "1"),
    ]
    # The suite's PostgreSQL server; the benchmark works in a database of its own there.
    server = database_url_for_subprocess("postgres")
    results = turn_pipeline.main([*tiny, "--database-url", server, "--json", str(out)])

    ours = results["ours"]
    assert results["before"] is None
    assert ours["sql"]["later"]["statements"] > 0 and ours["sql"]["later"]["hops"] > 0
    for transport in ("websocket", "sse"):
        assert ours["ttft"][transport]["memory"]["turns"] == 2
        assert ours["ttft"][transport]["memory"]["p50_ms"] > 0
    assert ours["rest"]["runs"][0]["turns"] > 0 and ours["rest"]["concurrency"] == 2
    # A slope from one repetition of tiny streams may be anything: only that it was measured.
    assert ours["stream"]["service_large_us"] > 0 and ours["stream"]["engine_large_us"] > 0
    written = json.loads(out.read_text())
    assert written["benchmark"] == "turn_pipeline"
    assert "before: not measured" in capsys.readouterr().out
    assert "database_url" not in written["parameters"]  # it may hold a password
    summary = {r["what"]: r for r in run_all.rows({"turn_pipeline": written})}
    later = summary["7 turn: SQL statements / commits / thread hops, later turn (memory chain)"]
    assert later["peer"] == "before #17: not measured" and later["met"] in ("met", "**missed**")


def _data(recall: float, lost: int) -> dict:
    machine = {
        "cpu": "Test CPU",
        "cores": 2,
        "memory_gib": 4.0,
        "os": "Linux",
        "python": "3.11",
        "load_average": [1.0, 1.0, 1.0],
        "cpu_pressure_pct": 10.0,
        "date": "today",
    }
    runs = [
        {
            "layer": layer,
            "mode": mode,
            "clients": 500,
            "chats": 500,
            "lost_chats": lost,
            "frames": 100,
            "frames_per_s": 1000.0,
            "gap_p50": 40.0,
            "gap_p99": 90.0,
            "cpu": 5.0,
            "wall": 10.0,
        }
        for layer in ("memory", "redis")
        for mode in ("coalesced", "per token")
    ]
    vector = {
        "hnsw_p50_ms": 2.0,
        "exact_sql_p50_ms": 90.0,
        "numpy_p50_ms": 5.0,
        "recall_at_10": recall,
    }
    return {
        "memory_window": {
            "machine": machine,
            "results": {
                key: {"ms": {"10": 2.0, "1000": 2.0, "100000": 2.1}, "ratio": 1.05}
                for key in ("get", "aget", "add", "spring_read")
            },
        },
        "vector_search": {
            "machine": machine,
            "parameters": {"rows": 100_000, "dimensions": 384},
            "results": {"no_filter": vector, "filter_1pct": vector},
        },
        "websocket_load": {"machine": machine, "results": {"runs": runs}},
    }


def test_summary_table_marks_met_and_missed_targets() -> None:
    met = {r["what"]: r["met"] for r in run_all.rows(_data(recall=0.99, lost=0))}
    assert met["3 memory: window read at 100,000 / at 10 messages"] == "met"
    assert met["4 vector: HNSW recall@10, 100,000 × 384, no filter"] == "met"
    assert met["5 websocket, redis layer, 500 chats: lost chats"] == "met"

    missed = {r["what"]: r["met"] for r in run_all.rows(_data(recall=0.9, lost=2))}
    assert missed["4 vector: HNSW recall@10, 100,000 × 384, no filter"] == "**missed**"
    assert missed["5 websocket, memory layer, 500 chats: lost chats"] == "**missed**"


def test_readme_table_is_replaced_between_the_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\n{run_all.START}\nold table\n{run_all.END}\n\n## Notes\n")
    block = run_all.table(_data(recall=0.99, lost=0), wall=600.0)

    assert run_all.update_readme(block, readme)
    text = readme.read_text()
    assert "old table" not in text
    assert text.startswith("# Title\n") and text.endswith("## Notes\n")
    assert "10.0 min in all" in text and "Test CPU, 2 cores" in text
    assert "| 4 vector: HNSW recall@10, 100,000 × 384, no filter | 0.990 |" in text
    other = tmp_path / "other.md"
    other.write_text("no markers\n")
    assert not run_all.update_readme(block, other)
    assert other.read_text() == "no markers\n"


def test_ingestion_load_runs_at_tiny_sizes(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ingestion.json"
    tiny = ["--kb", "20", "--seconds", "1", "--idle", "5", "--nice", "10"]
    # The suite's PostgreSQL server; the benchmark works in a database of its own there.
    server = database_url_for_subprocess("postgres")
    results = ingestion_load.main([*tiny, "--database-url", server, "--json", str(out)])

    [phase] = results["phases"]
    assert phase["niceness"] == 10 and phase["job_total"] > 0
    assert phase["latency"]["requests"] > 0 and results["idle"]["requests"] == 10
    written = json.loads(out.read_text())
    assert written["benchmark"] == "ingestion_load"
    assert "database_url" not in written["parameters"]
    assert "during the ingestion, worker at nice 10" in capsys.readouterr().out
    [row] = [r for r in run_all.rows({"ingestion_load": written}) if r["what"].startswith("8 ")]
    assert row["what"].startswith("8 small REST request during a 20 KB ingestion (worker at nice")
    assert row["met"] in ("met", "**missed**")
