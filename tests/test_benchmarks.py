"""Smoke tests of ``benchmarks/``: the chain, turn, ingestion and websocket benchmarks at tiny
sizes (the websocket one, two daphne processes on Redis, is marked slow), the websocket
benchmark's counting of lost and duplicated frames, the demo-sized prompt, the head every
benchmark prints, and the summary.

None needs the peers of ``requirements-bench.txt`` (CI does not install them): without
LangChain the chain benchmark measures our side only and says so; the turn benchmark runs
without its baseline worktree (``--baseline none``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import _common, chain_overhead, ingestion_load, run_all, turn_pipeline
from tests.helpers import database_url_for_subprocess, subprocess_env


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
        "cpu_pressure_avg10_pct": 12.0,
        "date": "today",
    }
    vector = {
        "hnsw_p50_ms": 2.0,
        "hnsw_p99_ms": 4.0,
        "exact_sql_p50_ms": 90.0,
        "numpy_p50_ms": 5.0,
        "recall_at_10": recall,
        "exact_fallbacks": 0,
    }
    websocket = {
        "chats": 500,
        "resumed_chats": 100,
        "lost_frames": lost,
        "duplicated_frames": 0,
        "lost_chats": 1 if lost else 0,
        "first_delta_p50_ms": 120.0,
        "first_delta_p99_ms": 400.0,
        "done_p50_ms": 10_300.0,
        "done_p99_ms": 11_000.0,
        "gap_p50_ms": 100.0,
        "gap_p99_ms": 90.0,
        "cpu_a_pct": 60.0,
        "cpu_b_pct": 10.0,
    }
    figure = {"median": 100.0, "low": 90.0, "high": 120.0}
    case = {k: figure for k in ("prefill_ms", "decode_tokens_per_s")} | {
        "prompt_tokens": {"median": 650.0, "low": 640.0, "high": 660.0}
    }
    embeddings = {f"c{n}": {"ours_one_per_s": 200.0, "ours_batch32_per_s": 400.0} for n in (1, 4)}
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
            "parameters": {"rows": 100_000, "dimensions": 384, "headline_ef_search": 100},
            "results": {"no_filter": vector, "filter_1pct": vector, "filter_10pct": vector},
        },
        "websocket_load": {
            "machine": machine,
            "parameters": {"tokens": 100, "interval": 0.1},
            "results": websocket,
        },
        "embedded_models": {
            "machine": machine,
            "results": {
                "chat": {
                    "rounds": 5,
                    "cases": {
                        f"{kind}, {side}": case
                        for kind in ("demo prompt", "question only")
                        for side in ("ours", "raw HTTP")
                    },
                },
                "embeddings": embeddings
                | {"direct_one_per_s": 250.0, "direct_batch32_per_s": 400.0},
            },
        },
    }


RECALL_ROW = "4 vector: recall@10, 100,000 real sentences (MiniLM), no filter, ef_search 100"
LOST_ROW = (
    "5 websocket, 500 chats on 2 processes (Redis), clients all on A, 100 resumed on the other: "
    "frames lost / duplicated (chats lost)"
)


def test_summary_table_marks_met_and_missed_targets() -> None:
    met = {r["what"]: r["met"] for r in run_all.rows(_data(recall=0.99, lost=0))}
    assert met["3 memory: window read at 100,000 / at 10 messages"] == "met"
    assert met[RECALL_ROW] == "met"
    assert met["4 vector: top-10 p50 / p99 ms, 1% filter"] == "met"
    assert met[LOST_ROW] == "met"
    assert met["5 websocket (all on A): first delta p50 / p99, ms"] == "met"
    assert met["5 websocket (all on A): inter-frame gap p50 / p99, ms"] == "met"
    assert any(
        w.startswith("6 embedded chat (SmolLM2-135M), demo prompt (650 tokens)") for w in met
    )

    missed = {r["what"]: r["met"] for r in run_all.rows(_data(recall=0.97, lost=2))}
    assert missed[RECALL_ROW] == "**missed**"  # 0.98 unfiltered
    assert missed[LOST_ROW] == "**missed**"
    filtered = "4 vector: recall@10, 100,000 real sentences (MiniLM), 1% filter, ef_search 100"
    assert missed[filtered] == "met"  # 0.95 filtered


def test_readme_table_is_replaced_between_the_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# Title\n\n{run_all.START}\nold table\n{run_all.END}\n\n## Notes\n")
    block = run_all.table(_data(recall=0.99, lost=0), wall=600.0)

    assert run_all.update_readme(block, readme)
    text = readme.read_text()
    assert "old table" not in text
    assert text.startswith("# Title\n") and text.endswith("## Notes\n")
    assert "10.0 min in all" in text and "Test CPU, 2 cores" in text
    assert f"| {RECALL_ROW} | 0.990 |" in text
    other = tmp_path / "other.md"
    other.write_text("no markers\n")
    assert not run_all.update_readme(block, other)
    assert other.read_text() == "no markers\n"


def test_every_benchmark_heads_its_output_with_the_cpu_pressure(capsys) -> None:
    info = _common.machine()
    _common.header("x", "what is measured", info)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# x — ")
    assert lines[1].startswith("# CPU pressure (some) avg10 ") or "not reported" in lines[1]
    assert lines[2] == "# Measures: what is measured"
    for name in ("chain_overhead", "safe_guard_matching", "memory_window", "vector_search"):
        source = (Path(run_all.ROOT) / "benchmarks" / f"{name}.py").read_text()
        assert "header(" in source, name
    for name in ("websocket_load", "embedded_models", "ingestion_load", "experiment_turn"):
        source = (Path(run_all.ROOT) / "benchmarks" / f"{name}.py").read_text()
        assert "header(" in source, name


def test_experiment_rows_compare_a_turn_with_and_without() -> None:
    results = {
        "assignment": {"new_unit_us": 6.0, "pinned_us": 4.0},
        "turn": {"plain_p50_ms": 4.0, "experiment_p50_ms": 4.01, "difference_us": 10.0},
        "statements": {"plain_open": 2, "experiment_open": 2},
    }
    summary = {r["what"]: r for r in run_all.rows({"experiment_turn": {"results": results}})}
    hook = summary["experiments: assign hook per turn, new unit / pinned conversation, µs"]
    assert hook["met"] == "met"
    assert summary["experiments: SQL statements opening a later turn"]["met"] == "met"


def _chat(index: int, frames: list[tuple[float, int, dict]], resumed: bool = False) -> Any:
    from benchmarks.websocket_load import Chat

    chat = Chat(index, "q", None, sent=0.0, frames=frames)
    chat.resume_sent = 0.5 if resumed else None
    return chat


def test_websocket_load_counts_lost_and_duplicated_frames_by_event_id() -> None:
    from benchmarks.websocket_load import summarize, verdicts

    def ev(n: int, kind: str = "delta", text: str = "", trace: str = "t") -> dict:
        frame = {"type": kind, "event_id": f"{trace}-{n}"}
        return frame | ({"text": text} if kind == "delta" else {})

    whole = _chat(
        0, [(0.1, 0, ev(1, "start")), (0.2, 0, ev(2, text="a b ")), (0.3, 0, ev(3, "done"))]
    )
    # Dropped after frame 2; B replays 2 again (a duplicate), then 3 and done 4.
    resumed = _chat(
        1,
        [
            (0.1, 0, ev(1, "start")),
            (0.2, 0, ev(2, text="a ")),
            (0.9, 1, ev(2, text="a ")),
            (0.95, 1, ev(3, text="b ")),
            (1.0, 1, ev(4, "done")),
        ],
        resumed=True,
    )
    # Frame 3 never came: text short, one frame lost.
    gap = _chat(2, [(0.1, 0, ev(1, "start")), (0.2, 0, ev(2, text="a ")), (0.3, 0, ev(4, "done"))])
    r = summarize([whole, resumed, gap], "a b ")
    assert (r["lost_frames"], r["duplicated_frames"], r["lost_chats"]) == (1, 1, 2)
    assert r["resumed_chats"] == 1 and r["resume_first_frame_p50_ms"] == 400.0
    # The drop's own gap (0.2 → 0.9, two sockets) is not an inter-frame gap.
    assert r["gap_p99_ms"] < 150
    assert [met for *_, met in verdicts(r)][:2] == [False, False]
    assert summarize([whole], "a b ")["lost_chats"] == 0


def test_the_demo_prompt_of_the_embedded_benchmark_is_demo_sized() -> None:
    from benchmarks._demo_corpus import demo_chunks, demo_questions, excerpt_prompt

    question, topic = demo_questions()[0]
    chunks = demo_chunks(3)
    prompt = excerpt_prompt(question, topic, chunks)
    assert prompt.startswith(f"Question: {question}")
    assert sum(chunk.text in prompt for chunk in chunks) == 3
    # About 650 model tokens: 3 chunks of 200 cl100k tokens, the template and the question.
    assert 1500 < len(prompt) < 4000


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


@pytest.mark.slow
def test_websocket_load_runs_at_tiny_sizes(tmp_path: Path) -> None:
    """Two daphne processes on the Redis layer, three chats, one dropped and resumed on B."""
    out = tmp_path / "websocket.json"
    tiny = [
        *("--clients", "3", "--tokens", "6", "--interval", "0.02", "--ramp", "0.1"),
        *("--topics", "1", "--resume-share", "0.5", "--reconnect", "0.05", "--deadline", "60"),
    ]
    env = subprocess_env(
        # The suite's PostgreSQL server; the benchmark makes (and drops) a database of its own.
        DATABASE_URL=database_url_for_subprocess("bench_websocket_smoke"),
        DJANGO_SETTINGS_MODULE="advisorsite.settings",
    )
    run = subprocess.run(
        [sys.executable, "benchmarks/websocket_load.py", *tiny, "--json", str(out)],
        cwd=run_all.ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# CPU pressure" in run.stdout and "# Measures: concurrent websocket chats" in run.stdout
    assert "target frames duplicated" in run.stdout
    written = json.loads(out.read_text())
    results = written["results"]
    assert written["parameters"]["servers"] == 2 and results["chats"] == 3
    assert results["frames"] > 0 and results["first_delta_p50_ms"] > 0
    assert {t["figure"] for t in results["targets"]} == {
        "frames lost",
        "frames duplicated",
        "first delta p99",
        "inter-frame gap p99",
    }
    assert any(
        r["what"].startswith("5 websocket, 3 chats")
        for r in run_all.rows({"websocket_load": written})
    )
