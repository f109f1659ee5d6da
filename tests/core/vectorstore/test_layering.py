"""The vector store, RAG, ingestion and retrieval advisors import without Django."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import subprocess_env

ROOT = Path(__file__).resolve().parents[3]
MODULES = [
    "advisors_app.core.vectorstore",
    "advisors_app.core.rag",
    "advisors_app.core.ingestion",
    "advisors_app.core.advisors.question_answer",
    "advisors_app.core.advisors.vector_store_chat_memory",
]


def test_retrieval_modules_import_without_django():
    script = (
        f"import importlib, json, sys; [importlib.import_module(m) for m in {MODULES!r}]; "
        "print(json.dumps(sorted({name.split('.')[0] for name in sys.modules})))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=subprocess_env(),
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout))
    assert loaded.isdisjoint({"django", "rest_framework", "channels", "daphne"})
