"""The documentation's runnable example prints what the page says it prints."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
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


def test_every_turn_event_type_is_described_in_the_events_page() -> None:
    from advisors_app.turn import events

    page = (ROOT / "docs" / "events.md").read_text()
    types = {
        cls.__dataclass_fields__["type"].default
        for cls in vars(events).values()
        if isinstance(cls, type) and "type" in getattr(cls, "__dataclass_fields__", {})
    }
    assert {"start", "delta", "done", "error"} <= types
    missing = sorted(kind for kind in types if f"| `{kind}` |" not in page)
    assert missing == [], f"docs/events.md does not describe: {missing}"


def test_the_layout_page_shows_the_layers_of_the_layering_test() -> None:
    from tests.test_layering import LAYERS

    page = (ROOT / "docs" / "layout.md").read_text()
    test = (ROOT / "tests" / "test_layering.py").read_text()
    picture = textwrap.dedent(test.split('"""')[1].split("\n\n")[1]).strip()
    assert picture in page
    assert all(f"\n{name} " in f"\n{picture}" for name, _ in LAYERS)
