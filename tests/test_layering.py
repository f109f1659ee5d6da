"""Dependencies point one way: the core imports without Django, DRF or Channels."""

from __future__ import annotations

import ast
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


# -- the import graph ------------------------------------------------------------------------

PACKAGE = ROOT / "advisors_app"

#: Layers from the bottom up (DESIGN.md §4): a module may import its own layer and those below.
#: Modules not named here (settings, validation, stores, ...) sit between models and definition.
LAYERS = (
    ("core", ("advisors_app.core",)),
    ("models", ("advisors_app.models",)),
    ("definition", ("advisors_app.definition",)),
    ("runtime", ("advisors_app.definition.runtime",)),
    ("services", ("advisors_app.turn.service",)),
    (
        "transports",
        (
            "advisors_app.api",
            "advisors_app.admin",
            "advisors_app.channels.consumers",
            "advisors_app.routing",
            "advisors_app.pages.views",
            "advisors_app.urls",
            "advisors_app.management",
            "advisors_app.demo.management",
        ),
    ),
)


def _module_names() -> dict[str, Path]:
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        if "migrations" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def import_graph() -> dict[str, set[str]]:
    """Which app modules each app module imports: every import statement, at any depth (in
    functions too, and under ``TYPE_CHECKING``), resolved to the module it names."""
    modules = _module_names()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            for target in targets:
                found = owner(target) if target.startswith("advisors_app") else None
                if found and found != name:
                    graph[name].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_module_of_the_app_takes_part_in_an_import_cycle() -> None:
    graph = import_graph()
    assert "advisors_app.definition.lint" in graph  # the walk found the package
    found = cycles(graph)
    details = [
        f"{' ↔ '.join(c)}: " + "; ".join(f"{m} → {sorted(graph[m] & set(c))}" for m in c)
        for c in found
    ]
    assert found == [], "\n".join(details)


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def _layer(module: str) -> int | None:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return rank
    return None


def test_dependencies_point_down_the_layers() -> None:
    upward = []
    for module, imported in import_graph().items():
        rank = _layer(module)
        for target in imported:
            target_rank = _layer(target)
            if rank is not None and target_rank is not None and target_rank > rank:
                upward.append(f"{module} ({LAYERS[rank][0]}) → {target} ({LAYERS[target_rank][0]})")
    assert upward == [], "\n".join(sorted(upward))
