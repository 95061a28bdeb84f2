"""The package's import graph: no cycles, dependencies only pointing down the layers.

The graph is read with ast from the source, and counts every way a module can load
another: import statements (function-local and TYPE_CHECKING ones included, so a cycle
hidden inside a function still counts) and strings that name a module (a lazy
``__init__`` map, ``importlib.import_module("effectbench.x")``, a ``relocated(...)``
table, ``"module:attribute"``). Old import paths kept for plugins and in-flight branches
are shims: nothing inside the package may import them.
"""

from __future__ import annotations

import ast
import importlib
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "effectbench"

# Lowest first. A module may import its own layer or any lower one, never a higher one.
# The audit's checks read a log only, so the verifier (which re-derives the manifest's
# attestations) sits above them; the audit's runner runs whole evaluations, beside the API.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("effectbench.core", "effectbench.schema"),
    ("effectbench.log",),
    ("effectbench.scoring",),
    ("effectbench.projections",),
    (
        "effectbench.oracles",
        "effectbench.arms",
        "effectbench.serve",
        "effectbench.providers_kit",
        "effectbench.faults",
        "effectbench.postgres",
        "effectbench.browser",
        "effectbench.displays",
        "effectbench.agents",
    ),
    ("effectbench.run", "effectbench.executors"),
    ("effectbench.outputs", "effectbench.report", "effectbench.viewer"),
    ("effectbench.audit",),
    ("effectbench.verify",),
    ("effectbench.api", "effectbench.testing", "effectbench.audit.runner"),
    ("effectbench.cli", "effectbench.scaffold", "effectbench.__main__", "effectbench"),
)
TOP = len(LAYERS) - 1


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_relocation(path: Path) -> bool:
    """Whether the module is only an old path: a docstring, the import of
    ``effectbench.core.relocated`` and ``__getattr__, __dir__ = relocated(...)``."""
    body = ast.parse(path.read_text("utf-8")).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    imports = [n for n in body if isinstance(n, ast.ImportFrom)]
    calls = [n for n in body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call)]
    return (
        len(body) == 2
        and [n.module for n in imports] == ["effectbench.core.relocated"]
        and len(calls) == 1
        and getattr(calls[0].value.func, "id", None) == "relocated"
    )


RELOCATED = frozenset(m for m, path in MODULES.items() if _is_relocation(path))
"""Old paths that warn (docs/deprecations.md). Each forwards to its new homes, so it sits
at the top, above all of them, like the other old top-level paths."""
KEPT = frozenset({"effectbench.model", "effectbench.provider", "effectbench.arm"})
"""Old paths kept for good: the public plugin API, star re-exports of effectbench.core."""
SHIM_MODULES = RELOCATED | KEPT
# Packages whose __init__ is the old module of the same name: importing a *name* from
# them (not a submodule) goes through the shim.
SHIM_PACKAGES = frozenset(
    {"effectbench.verify"} | {m for m in RELOCATED if MODULES[m].name == "__init__.py"}
)
LOGGER_CALLS = frozenset({"get_logger", "getLogger"})


def _owner(name: str) -> str:
    """The module a dotted import name lives in (a name imported from a module -> it)."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def _named_modules(tree: ast.AST) -> Iterator[str]:
    """Modules named by a string: ``"effectbench.x.y"`` or ``"effectbench.x.y:attr"``
    anywhere (a lazy map, an importlib call, a relocation table), docstrings and logger
    names aside. The bare distribution name ``"effectbench"`` is no import."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skip.add(id(body[0].value))
        if isinstance(node, ast.Call):
            func = node.func
            if getattr(func, "attr", getattr(func, "id", None)) in LOGGER_CALLS:
                skip.update(id(arg) for arg in node.args)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            name, _, attribute = node.value.partition(":")
            if "." in name and name in MODULES and (not attribute or attribute.isidentifier()):
                yield name


def _imports(module: str, path: Path) -> Iterator[tuple[str, bool]]:
    """(imported module, goes through a shim) for every effectbench import in the file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    tree = ast.parse(path.read_text("utf-8"))
    for name in _named_modules(tree):
        yield name, name in SHIM_MODULES
    for node in ast.walk(tree):
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
    """Every module, old paths included, with everything it can load."""
    return {
        module: {t for t, _ in _imports(module, path) if t != module}
        for module, path in MODULES.items()
    }


def _layer(module: str) -> int:
    if module in RELOCATED:
        return TOP
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
    # cli/run_commands.py imports the API only inside its command functions.
    assert "effectbench.api" in _graph()["effectbench.cli.run_commands"]


def test_the_walker_sees_lazy_maps_and_importlib_strings(tmp_path: Path) -> None:
    """A module loaded through a string is an edge like an import statement; a docstring,
    a logger's name, a message and the distribution's name are not."""
    source = tmp_path / "lazy.py"
    source.write_text(
        textwrap.dedent(
            '''
            """Mentions effectbench.api in its docstring."""
            import importlib
            import structlog

            _LAZY = {"evaluate": "effectbench.api"}
            log = structlog.get_logger("effectbench.run.scheduler")
            DIST = "effectbench"
            SAY = "effectbench: error"

            def load():
                """And effectbench.verify.compare here."""
                importlib.import_module("effectbench.audit.checks")
                return __import__("effectbench.outputs.artifacts")

            ENTRY = "effectbench.arms.baselines:ScreenOnlyArm"
            '''
        ),
        "utf-8",
    )
    found = {t for t, _ in _imports("effectbench.core.lazy", source)}
    assert found == {
        "effectbench.api",
        "effectbench.audit.checks",
        "effectbench.outputs.artifacts",
        "effectbench.arms.baselines",
    }


def test_upward_edges_through_strings_count() -> None:
    """The two that pointed up before the old package names became relocations: the
    scoring package's lazy map named the projections, the audit's the runner and the
    CLI. As code of their own packages those edges point up; as old paths they are
    at the top, where the old top-level modules are."""
    assert "effectbench.projections.episodes" in _graph()["effectbench.scoring"]
    assert {"effectbench.audit.runner", "effectbench.cli.audit"} <= _graph()["effectbench.audit"]
    assert {"effectbench.scoring", "effectbench.audit"} <= RELOCATED
    assert _layer("effectbench.scoring.judge") < _layer("effectbench.projections.episodes")


def test_old_paths_are_only_relocations() -> None:
    """Every module that relocates names does nothing else (else it would sit at the
    top for its other code too), and the helper's own module is none."""
    users = {m for m, path in MODULES.items() if "relocated(" in path.read_text("utf-8")}
    assert users - {"effectbench.core.relocated"} == set(RELOCATED)
    assert len(RELOCATED) == 26


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], f"{len(cycles)} import cycle(s): {cycles}"


def test_hashing_is_a_leaf_so_the_model_can_use_it() -> None:
    # Effect.content_hash() (deprecated) calls hashing; hashing must not need the model.
    graph = _graph()
    assert graph["effectbench.core.hashing"] == set()
    assert "effectbench.core.hashing" in graph["effectbench.core.effects"]
    assert "effectbench.core.effects" in graph["effectbench.core.model"]


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


FIRST_PARTY = ("plugins_example", "providers")
"""The first-party plugins: the template third parties copy, MockMed and Roundup."""


def _first_party_imports() -> Iterator[tuple[Path, str, str]]:
    """(file, module, name) for every name a first-party plugin imports from effectbench."""
    root = PACKAGE.parent
    for top in FIRST_PARTY:
        for path in sorted(root.joinpath(top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                    continue
                if node.module.split(".")[0] == "effectbench":
                    for alias in node.names:
                        yield path.relative_to(root), node.module, alias.name


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
HOMES_OF_PUBLIC = {f"effectbench.core.{m.rpartition('.')[2]}": m for m in PUBLIC_API}


@pytest.mark.parametrize("module", sorted(PUBLIC_API))
def test_the_public_plugin_paths_reexport_the_new_homes(module: str) -> None:
    shim = importlib.import_module(module)
    wanted = set(PUBLIC_API[module]) | {
        name for _, source, name in _first_party_imports() if source == module
    }
    missing = sorted(name for name in wanted if not hasattr(shim, name))
    assert missing == []
    # A re-export is the very object of the new home, not a copy.
    for name in wanted:
        value = getattr(shim, name)
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and home.startswith("effectbench.") and callable(value):
            assert getattr(importlib.import_module(home), value.__name__, None) is value


def test_first_party_plugins_import_plugin_types_from_the_documented_paths() -> None:
    """MockMed, Roundup and the example import what docs/writing-a-provider.md tells a
    third party to (effectbench.model, .provider, .arm), so the template people copy
    looks like the docs; never the core modules behind them."""
    through_core = [
        f"{path}: from {module} import {name} (use {HOMES_OF_PUBLIC[module]})"
        for path, module, name in _first_party_imports()
        if module in HOMES_OF_PUBLIC
    ]
    assert through_core == []
    used = {module for _, module, _ in _first_party_imports()}
    assert set(PUBLIC_API) <= used | {"effectbench.arm"}


def _relocated_paths() -> dict[str, frozenset[str]]:
    """Old path -> the names it forwards with a warning (effectbench.core.relocated)."""
    found: dict[str, frozenset[str]] = {}
    for module, path in MODULES.items():
        if "relocated(" in path.read_text("utf-8") and module != "effectbench.core.relocated":
            names = importlib.import_module(module).__all__
            kept = {"main"} if module == "effectbench.cli" else set()
            found[module] = frozenset(names) - kept
    return found


def test_nothing_in_the_repository_imports_a_relocated_path() -> None:
    """Tests, benches and first-party plugins use the new homes (the package itself:
    test_nothing_inside_the_package_imports_a_shim); the suite's filterwarnings turns
    a use that slips through at run time into an error too."""
    relocated = _relocated_paths()
    root = PACKAGE.parent
    offenders = []
    for top in ("tests", "bench", *FIRST_PARTY):
        for path in sorted(root.joinpath(top).rglob("*.py")):
            if path.name == "test_deprecations.py":
                continue
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    old = relocated.get(node.module, frozenset())
                    offenders += [
                        f"{path.relative_to(root)}:{node.lineno} {node.module}.{a.name}"
                        for a in node.names
                        if a.name in old
                    ]
                elif isinstance(node, ast.Import):
                    offenders += [
                        f"{path.relative_to(root)}:{node.lineno} import {a.name}"
                        for a in node.names
                        if a.name in relocated and MODULES[a.name].name != "__init__.py"
                    ]
    assert offenders == []


@pytest.mark.parametrize(
    "module",
    [
        "effectbench.projections.episodes",
        "effectbench.verify.submission_rules",
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


@pytest.mark.parametrize("module", ["effectbench.run.scheduler", "effectbench.run.episode"])
def test_the_scheduler_writes_only_typed_events(module: str) -> None:
    """Every event the scheduler and an episode's stages write is built from a class of
    effectbench.core.events: ``emit(*typed(Event(...)), ep)`` or
    ``writer.emit_event(Event(...))``. Only the executor's sink (``record``) passes lines
    on as they are: a worker, or the executor, built them the same way."""
    tree = ast.parse(MODULES[module].read_text("utf-8"))
    untyped = []
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if func.name == "record":
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
                and getattr(first.value.func, "id", None) in ("typed", "_typed")
            )
            if not typed:
                untyped.append(f"{func.name}, line {node.lineno}")
    assert untyped == []


def _capability_reads(tree: ast.AST, names: frozenset[str]) -> Iterator[tuple[int, str]]:
    """(line, member) of each ``getattr``/``hasattr`` of a plugin capability by name."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
            continue
        if node.func.id not in ("getattr", "hasattr") or len(node.args) < 2:
            continue
        member = node.args[1]
        if isinstance(member, ast.Constant) and member.value in names:
            yield node.lineno, str(member.value)


def test_the_walker_sees_a_capability_read() -> None:
    tree = ast.parse("x = getattr(arm, 'uses_browser', False)\ny = hasattr(p, 'fixture')")
    names = frozenset({"uses_browser", "fixture"})
    assert list(_capability_reads(tree, names)) == [(1, "uses_browser"), (2, "fixture")]


def test_plugin_capabilities_are_read_only_in_core() -> None:
    """An optional plugin member is read by effectbench.core.capabilities and nowhere
    else, so a new one is declared (and checked at load) before the harness uses it.
    ``version`` is left out: it is also every distribution's and module's."""
    from effectbench.core.capabilities import ARM_CAPABILITIES, PROVIDER_CAPABILITIES

    names = frozenset(ARM_CAPABILITIES + PROVIDER_CAPABILITIES) - {"version"}
    found = [
        f"{module}:{line} reads {member!r}"
        for module, path in _modules().items()
        if not module.startswith("effectbench.core")
        for line, member in _capability_reads(ast.parse(path.read_text()), names)
    ]
    assert found == [], "read it through ArmCapabilities / ProviderCapabilities.of"


def test_the_run_lock_is_taken_in_one_place() -> None:
    """The run's lock on its log (a run's, ``--force``'s, a reader's) comes from
    run/runlock.py alone, so they cannot disagree on what it is. postgres/server.py's flock
    guards its server's data directory, another lock."""
    takers = sorted(
        name
        for name, path in MODULES.items()
        if "fcntl.flock(" in path.read_text("utf-8")
        and name not in ("effectbench.run.runlock", "effectbench.postgres.server")
    )
    assert takers == []


MAX_LINES = 600


def test_no_module_is_over_600_lines() -> None:
    """A newcomer reads a module whole: past 600 lines one is split by job, its old names
    re-exported where they were."""
    long = {
        module: count
        for module, path in sorted(MODULES.items())
        if (count := len(path.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_executors_see_the_run_only_through_its_sink() -> None:
    """An executor is handed an ``EpisodeSink`` (executors/base.py), never the scheduler:
    no module of effectbench.executors imports it, in any form."""
    graph = _graph()
    reaching = sorted(
        module
        for module in MODULES
        if module.startswith("effectbench.executors")
        and "effectbench.run.scheduler" in graph.get(module, set())
    )
    assert reaching == []


def test_no_test_module_imports_another() -> None:
    """Shared test helpers live in helper modules (tests/run_files.py, tests/processes.py,
    ...), never in a test module another one imports: each test file stands alone."""
    tests = PACKAGE.parent / "tests"
    found = [
        f"{path.name}:{node.lineno} imports {name}"
        for path in sorted(tests.rglob("test_*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        for name in _imported_names(node)
        if name.split(".")[0].startswith("test_")
    ]
    assert found == []


def _imported_names(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    return []


# Test folders that are not a package of effectbench: the MockMed provider's tests, the
# repository's own checks (docs, examples, Makefile), and the agent scripts tests run.
TEST_FOLDERS_BEYOND_THE_PACKAGE = frozenset({"mockmed", "repo", "agents", "golden"})


def test_tests_mirror_the_package() -> None:
    """A test module lives in tests/<package>/ named after the effectbench package it
    covers, so the test of a module is found where the module is; shared helpers stay at
    tests/ top level and are never test modules."""
    tests = PACKAGE.parent / "tests"
    packages = {path.stem for path in PACKAGE.iterdir() if not path.name.startswith("_")}
    misplaced = [
        str(path.relative_to(tests))
        for path in sorted(tests.rglob("test_*.py"))
        if len(path.relative_to(tests).parts) != 2
        or path.parent.name not in packages | TEST_FOLDERS_BEYOND_THE_PACKAGE
    ]
    assert misplaced == [], (
        "move each test module into tests/<package>/ for the effectbench package it "
        f"tests (or tests/repo/ for checks of the repository itself): {misplaced}"
    )
