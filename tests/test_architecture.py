"""The package's import graph: no cycles, dependencies only pointing down the layers.

The graph is read with ast from the source (function-local and TYPE_CHECKING imports
included), so a cycle hidden inside a function still counts. Old import paths kept for
plugins and in-flight branches are shims: nothing inside the package may import them.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "effectbench"

# Lowest first. A module may import its own layer or any lower one, never a higher one.
# The audit's checks read a log only, so the verifier (which re-derives the manifest's
# attestations) sits above them; the audit's runner runs whole evaluations, beside the API.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("effectbench.core", "effectbench.schema", "effectbench.evidence"),
    ("effectbench.log",),
    ("effectbench.scoring",),
    ("effectbench.projections",),
    (
        "effectbench.oracles",
        "effectbench.arms",
        "effectbench.serve",
        "effectbench.faults",
        "effectbench.pgserver",
        "effectbench.pgpool",
        "effectbench.browser",
        "effectbench.agents",
    ),
    ("effectbench.run", "effectbench.executors"),
    ("effectbench.outputs", "effectbench.report"),
    ("effectbench.audit",),
    ("effectbench.verify",),
    ("effectbench.api", "effectbench.testing", "effectbench.audit.runner"),
    ("effectbench.cli", "effectbench.scaffold", "effectbench.__main__", "effectbench"),
)

# Old module paths, kept as re-exports of their new homes (see docs/architecture.md).
SHIM_MODULES = frozenset(
    f"effectbench.{name}"
    for name in (
        "model",
        "codec",
        "events",
        "provider",
        "arm",
        "rundir",
        "judge",
        "classify",
        "stats",
        "records",
        "sql_oracle",
        "plan",
        "scheduler",
        "registry",
        "artifacts",
        "parallel",
        "pack",
        "console",
        "_logging",
    )
)
# Packages whose __init__ is the old module of the same name: importing a *name* from
# them (not a submodule) goes through the shim.
SHIM_PACKAGES = frozenset(
    f"effectbench.{name}" for name in ("log", "scoring", "verify", "audit", "cli")
)


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str:
    """The module a dotted import name lives in (a name imported from a module -> it)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _imports(module: str, path: Path) -> Iterator[tuple[str, bool]]:
    """(imported module, goes through a shim) for every effectbench import in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "effectbench":
                    target = _owner(alias.name)
                    yield target, target in SHIM_MODULES
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            if source.split(".")[0] != "effectbench":
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in MODULES:
                    yield full, full in SHIM_MODULES
                else:
                    target = _owner(source)
                    yield target, target in SHIM_MODULES or target in SHIM_PACKAGES


def _is_shim(module: str) -> bool:
    return module in SHIM_MODULES or module in SHIM_PACKAGES


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        if _is_shim(module):
            continue
        graph[module] = {t for t, _ in _imports(module, path) if t != module and not _is_shim(t)}
    return graph


def _layer(module: str) -> int:
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or module.startswith(prefix + ".")
            if inside and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), plus self-loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
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

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_walker_sees_function_local_imports_and_cycles() -> None:
    assert "effectbench.core.model" in MODULES
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    # cli/commands.py imports the API only inside its command functions.
    assert "effectbench.api" in _graph()["effectbench.cli.commands"]


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], f"{len(cycles)} import cycle(s): {cycles}"


def test_hashing_is_a_leaf_so_the_model_can_use_it() -> None:
    # Effect.content_hash() (deprecated) calls hashing; hashing must not need the model.
    graph = _graph()
    assert graph["effectbench.core.hashing"] == set()
    assert "effectbench.core.hashing" in graph["effectbench.core.model"]


def test_imports_only_point_down_the_layers() -> None:
    upward = [
        f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
        for module, targets in sorted(_graph().items())
        for target in sorted(targets)
        if _layer(target) > _layer(module)
    ]
    assert upward == []


def test_nothing_inside_the_package_imports_a_shim() -> None:
    offenders = [
        f"{module} imports {target}"
        for module, path in sorted(MODULES.items())
        if not _is_shim(module)
        for target, via_shim in _imports(module, path)
        if via_shim and target != module
    ]
    assert offenders == []


def _names_imported_from_old_paths() -> dict[str, set[str]]:
    """Every name plugins_example and providers/ import from a shimmed module path."""
    names: dict[str, set[str]] = {}
    root = PACKAGE.parent
    paths = [
        *root.joinpath("plugins_example").rglob("*.py"),
        *root.joinpath("providers").rglob("*.py"),
    ]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            if node.module in SHIM_MODULES or node.module in SHIM_PACKAGES:
                names.setdefault(node.module, set()).update(a.name for a in node.names)
    return names


# The public plugin API: every name a plugin may import from the documented paths.
PUBLIC_API = {
    "effectbench.provider": (
        "BenchmarkProvider",
        "EnvHandle",
        "ModelCall",
        "Oracle",
        "ProductDriver",
        "ProductResponse",
        "ProductVerifier",
        "ProvisionedEpisode",
        "SkipEpisode",
        "Telemetry",
    ),
    "effectbench.arm": ("Arm", "TaskView"),
    "effectbench.model": (
        "AgentReport",
        "Category",
        "Effect",
        "FieldEquals",
        "JSONScalar",
        "OracleSpec",
        "ParamRef",
        "RecordWritten",
        "Row",
        "Snapshot",
        "Split",
        "TaskSpec",
        "SPEC_VERSION",
    ),
}


@pytest.mark.parametrize("module", sorted(SHIM_MODULES | SHIM_PACKAGES))
def test_old_paths_reexport_the_new_homes(module: str) -> None:
    shim = importlib.import_module(module)
    wanted = set(PUBLIC_API.get(module, ())) | _names_imported_from_old_paths().get(module, set())
    missing = sorted(name for name in wanted if not hasattr(shim, name))
    assert missing == []
    # A re-export is the very object of the new home, not a copy.
    for name in wanted:
        value = getattr(shim, name)
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and home.startswith("effectbench.") and callable(value):
            assert getattr(importlib.import_module(home), value.__name__, None) is value


def test_plugins_example_imports_the_old_public_paths() -> None:
    # The example plugin is the template third parties copy: it keeps the documented
    # paths, so the suite exercises them for real.
    used = _names_imported_from_old_paths()
    assert {"effectbench.provider", "effectbench.model"} <= set(used)


@pytest.mark.parametrize(
    "module",
    [
        "effectbench.projections.episodes",
        "effectbench.verify.submission",
        "effectbench.cli.console",
    ],
)
def test_labels_come_from_one_function(module: str) -> None:
    """The projection, the verifier and the console turn judge + classify into labels
    only through effectbench.scoring.labels.score_episode."""
    targets = {t for t, _ in _imports(module, MODULES[module])}
    assert "effectbench.scoring.labels" in targets
    assert not targets & {"effectbench.scoring.judge", "effectbench.scoring.classify"}


def _run_file_literals(path: Path) -> list[str]:
    """String constants in a module that are, or start, a run directory's file name
    (docstrings aside): each is a file named outside effectbench.core.rundir."""
    from effectbench.core.rundir import RUN_FILES

    tree = ast.parse(path.read_text("utf-8"))
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"line {node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in docs
        and any(node.value == name or node.value.startswith(f"{name}#") for name in RUN_FILES)
    ]


def test_run_files_are_named_only_by_rundir() -> None:
    spelled = {
        module: found
        for module, path in sorted(MODULES.items())
        if module != "effectbench.core.rundir" and (found := _run_file_literals(path))
    }
    assert spelled == {}


def test_old_file_name_constants_are_aliases_of_rundir() -> None:
    from effectbench.audit import checks
    from effectbench.core import rundir
    from effectbench.projections import episodes
    from effectbench.report import data, page
    from effectbench.run import outdir, scheduler

    assert scheduler.LOG_NAME == episodes.LOG_NAME == outdir.LOG_NAME == rundir.LOG_FILE
    assert (data.LOG, data.RESULTS, data.MANIFEST, data.METRICS) == (
        rundir.LOG_FILE,
        rundir.RESULTS_FILE,
        rundir.MANIFEST_FILE,
        rundir.METRICS_FILE,
    )
    assert (checks.AUDIT_FILE, page.REPORT_FILE) == (rundir.AUDIT_FILE, rundir.REPORT_FILE)


def test_the_scheduler_writes_only_typed_events() -> None:
    """Every event the scheduler writes is built from a class of effectbench.core.events:
    ``emit(*_typed(Event(...)), ep)`` or ``writer.emit_event(Event(...))``. Only
    ``write_events`` (the executor seam) passes lines on as they are: a worker, or the
    executor, built them the same way."""
    tree = ast.parse(MODULES["effectbench.run.scheduler"].read_text("utf-8"))
    untyped = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if func.name == "write_events":
            continue
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
            if name not in ("emit", "_emit") or not node.args:
                continue
            first = node.args[0]
            typed = (
                isinstance(first, ast.Starred)
                and isinstance(first.value, ast.Call)
                and getattr(first.value.func, "id", None) == "_typed"
            )
            if not typed:
                untyped.append(f"{func.name}, line {node.lineno}")
    assert untyped == []
