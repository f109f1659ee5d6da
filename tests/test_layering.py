"""Dependencies point one way: the core imports without Django, DRF or Channels, and every
module of the app sits on a ranked layer it imports only down from (docs/layout.md, "Layers").

    wiring      apps  checks  urls  routing                              what Django loads
    transports  api  admin  channels  mcp_server  pages  management      how a turn is asked for
                templatetags  demo.management  security.body_limits
    callers     approvals.jobs  evaluation.runs  evaluation.gate         run turns themselves
                experiments.lifecycle  online/  integration  protocols
    turn        turn/  approvals.pauses                                  one chat turn
    features    memory/  costs/  evaluation/  ingestion/  security/      one folder a feature
                guards/  demo/  definition.advisor_types  experiments/  telemetry/
    definition  definition/ (snapshot, lint, compile, versions, runtime) rows → a chain
    stores      stores/  mcp/  costs.pricing                             what a chain is built from
    models      models/                                                  the tables
    registries  definition.registry  .tools  .providers  security.redaction
    foundation  conf  exceptions  validation  orders  db/  embedded_postgres
                security.bidi  .origins  .secret_files
    core        core/  (no Django)                                       the engine

A module imports its own layer and those below; the most specific prefix names its layer; a
module no prefix names fails the test.
"""

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

#: The layers from the bottom up (DESIGN.md §1/§4; the picture in the module docstring, kept in
#: step with docs/layout.md): a module may import its own layer and those below. A module's
#: layer is that of the longest prefix naming it. Where a module sits away from its folder's
#: layer, the reason:
#:
#: * ``definition.registry``, ``.tools`` and ``.providers`` sit below the models: they import only
#:   the core and ``validation``, and a chain's rows are validated against the registered advisor
#:   types and tools (``models.chains``) — the registry is the table plug-ins fill, not the
#:   compiler. Moving them out of ``definition/`` would move documented import paths.
#: * ``security.redaction`` sits with them: models redact secret headers (``models.model_configs``)
#:   and redaction knows the providers' key variables (``definition.providers``).
#: * ``stores/``, ``mcp/`` (the MCP client) and ``costs.pricing`` sit below ``definition``: a
#:   compiled chain is built from them.
#: * ``definition.advisor_types`` (the built-in advisor types) is a plug-in, a feature: it
#:   registers into the registry at start-up (``apps``), the compiler only reads the registry, and
#:   the session-memory type uses ``memory.compaction``, which compiles a snapshot.
#: * ``approvals.pauses`` is part of the turn: it parses the turn's decisions and the turn's stages
#:   call it to pause and resume at a tool call; it stays beside the approval jobs and admin.
#: * ``approvals.jobs``, ``evaluation.runs`` and ``evaluation.gate`` run turns: callers of the turn.
#:   ``integration`` (the Python API for projects) runs turns and moves labels through the gate.
#: * ``experiments.lifecycle`` concludes through the promotion gate (``evaluation.gate``).
#: * ``protocols`` (AG-UI, the AI SDK's UI message stream) translates a turn's input and frames
#:   for the views that serve those protocols: above the turn, below the transports.
#: * ``security.body_limits`` is an ASGI middleware, the HTTP front door, answering in the REST
#:   API's error shape (``api.errors``): a transport, though it lives in ``security/``.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("core", ("advisors_app.core",)),
    (
        "foundation",
        (
            "advisors_app",  # the package's own __init__ (this prefix names only itself)
            "advisors_app.conf",
            "advisors_app.exceptions",
            "advisors_app.validation",
            "advisors_app.orders",
            "advisors_app.db",
            "advisors_app.embedded_postgres",
            "advisors_app.security.bidi",
            "advisors_app.security.origins",
            "advisors_app.security.secret_files",
        ),
    ),
    (
        "registries",
        (
            "advisors_app.definition.registry",
            "advisors_app.definition.tools",
            "advisors_app.definition.providers",
            "advisors_app.security.redaction",
        ),
    ),
    ("models", ("advisors_app.models",)),
    ("stores", ("advisors_app.stores", "advisors_app.mcp", "advisors_app.costs.pricing")),
    ("definition", ("advisors_app.definition",)),
    (
        "features",
        (
            "advisors_app.definition.advisor_types",
            "advisors_app.memory",
            "advisors_app.costs",
            "advisors_app.evaluation",
            "advisors_app.ingestion",
            "advisors_app.security",
            "advisors_app.guards",
            "advisors_app.demo",
            "advisors_app.approvals",  # the package's __init__; its modules are ranked below
            "advisors_app.experiments",
            "advisors_app.telemetry",
        ),
    ),
    ("turn", ("advisors_app.turn", "advisors_app.approvals.pauses")),
    (
        "callers",
        (
            "advisors_app.approvals.jobs",
            "advisors_app.evaluation.runs",
            "advisors_app.evaluation.gate",
            "advisors_app.experiments.lifecycle",
            "advisors_app.online",  # stores scores as evaluation.runs does (its _score_value)
            "advisors_app.integration",
            "advisors_app.protocols",
        ),
    ),
    (
        "transports",
        (
            "advisors_app.api",
            "advisors_app.admin",
            "advisors_app.channels",
            "advisors_app.mcp_server",
            "advisors_app.pages",
            "advisors_app.management",
            "advisors_app.demo.management",
            "advisors_app.templatetags",
            "advisors_app.security.body_limits",
        ),
    ),
    (
        "wiring",
        ("advisors_app.apps", "advisors_app.checks", "advisors_app.urls", "advisors_app.routing"),
    ),
)

#: The packages that are transports: no module outside them imports one (but the wiring).
TRANSPORTS = (
    "advisors_app.api",
    "advisors_app.admin",
    "advisors_app.channels",
    "advisors_app.mcp_server",
    "advisors_app.pages",
    "advisors_app.management",
    "advisors_app.demo.management",
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


def _within(module: str, prefix: str) -> bool:
    if prefix == "advisors_app":  # the root names only itself, never the modules under it
        return module == prefix
    return module == prefix or module.startswith(prefix + ".")


def _layer(module: str) -> int | None:
    """The rank of ``module``'s layer: that of the longest prefix naming it (``None``: none)."""
    named = [
        (len(prefix), rank)
        for rank, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if _within(module, prefix)
    ]
    return max(named)[1] if named else None


def test_every_module_of_the_app_has_a_layer() -> None:
    unranked = sorted(module for module in import_graph() if _layer(module) is None)
    assert unranked == [], "no layer in LAYERS names: " + ", ".join(unranked)


def test_the_longest_prefix_names_the_layer() -> None:
    names = [name for name, _ in LAYERS]
    assert _layer("advisors_app.definition.compile") == names.index("definition")
    assert _layer("advisors_app.definition.registry") == names.index("registries")
    assert _layer("advisors_app") == names.index("foundation")
    assert _layer("advisors_app.not_ranked_anywhere") is None


def test_dependencies_point_down_the_layers() -> None:
    upward = []
    for module, imported in import_graph().items():
        rank = _layer(module)
        for target in imported:
            target_rank = _layer(target)
            if rank is not None and target_rank is not None and target_rank > rank:
                upward.append(f"{module} ({LAYERS[rank][0]}) → {target} ({LAYERS[target_rank][0]})")
    assert upward == [], "\n".join(sorted(upward))


def _is_transport(module: str) -> bool:
    return any(_within(module, prefix) for prefix in TRANSPORTS)


def test_no_feature_and_not_the_turn_imports_a_transport() -> None:
    """Below the transports (features, the turn, its callers) nothing imports a transport."""
    below = LAYERS.index(next(layer for layer in LAYERS if layer[0] == "transports"))
    found = [
        f"{module} → {target}"
        for module, imported in import_graph().items()
        for target in imported
        if (_layer(module) or 0) < below and _is_transport(target)
    ]
    assert found == [], "\n".join(sorted(found))


def test_the_api_does_not_import_the_admin() -> None:
    found = [
        f"{module} → {target}"
        for module, imported in import_graph().items()
        if _within(module, "advisors_app.api")
        for target in imported
        if _within(target, "advisors_app.admin")
    ]
    assert found == [], "\n".join(sorted(found))
