"""Dependencies point one way: the core imports without Django, DRF or Channels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import subprocess_env

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = ("django", "rest_framework", "channels", "daphne", "drf_spectacular")


def test_core_imports_in_a_fresh_interpreter_without_django() -> None:
    script = (
        "import json, sys; import advisors_app.core; "
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
    assert "advisors_app" in loaded
    assert loaded.isdisjoint(FORBIDDEN), sorted(loaded & set(FORBIDDEN))
