"""The documentation's runnable example prints what the page says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_engine_page_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "engine.md").read_text()
    # The page's first Python block is the runnable example; later ones are Django snippets.
    code = re.findall(r"```python\n(.*?)```", page, re.DOTALL)[0]
    [shown] = re.findall(r"```text\n(.*?)```", page, re.DOTALL)
    script = tmp_path / "example.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == shown
