"""Every code reference in docs/*.md, README.md and SPEC.md resolves: a dotted
``effectbench.x.y`` name imports and has that attribute (not through an old path that
warns, outside docs/deprecations.md), every name a code block imports from effectbench
exists, and every source path (``run/scheduler.py``, ``tests/test_x.py::test_y``) names
a file, and a function or class in it, that exists."""

from __future__ import annotations

import ast
import importlib
import re
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [
    *sorted(ROOT.joinpath("docs").glob("*.md")),
    *sorted(ROOT.joinpath("examples").glob("*/README.md")),
    ROOT / "README.md",
    ROOT / "SPEC.md",
]
OLD_PATHS_DOC = "deprecations.md"
"""The one page that names old paths on purpose."""

DOTTED = re.compile(r"(?<![\w./-])effectbench(?:\.[A-Za-z_]\w*)+(?![\w/-])")
SPAN = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
FROM_IMPORT = re.compile(
    r"^\s*from (effectbench[\w.]*) import (?:\(([^)]*)\)|([^\n]*))", re.MULTILINE
)
ROOTS = ("effectbench/", "tests/", "bench/", "providers/", "plugins_example/", "docs/", "examples/")
SOURCE_TREES = ("effectbench", "providers", "plugins_example", "tests", "bench")


def _entry_point_groups() -> frozenset[str]:
    """``effectbench.providers`` and the like: names of entry point groups, not modules."""
    pyproject = tomllib.loads(ROOT.joinpath("pyproject.toml").read_text("utf-8"))
    return frozenset(pyproject["project"]["entry-points"])


GROUPS = _entry_point_groups()


def resolve(ref: str) -> tuple[bool, str]:
    """(whether ``ref`` names something, the old-path warning if it got there through one)."""
    parts = ref.split(".")
    obj: object = None
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError as error:
            if error.name is not None and ".".join(parts[:cut]).startswith(error.name + "."):
                continue
            if error.name == ".".join(parts[:cut]):
                continue
            raise
        break
    else:
        return False, ""
    old = ""
    for attribute in parts[cut:]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                obj = getattr(obj, attribute)
            except AttributeError:
                return False, ""
        old = old or next((str(w.message) for w in caught if w.category is DeprecationWarning), "")
    return True, old


def _dotted_references(text: str) -> Iterator[str]:
    for span in SPAN.finditer(text):
        yield from DOTTED.findall(span.group(1))
    for block in FENCE.finditer(text):
        code = block.group(1)
        yield from DOTTED.findall(code)
        for module, wrapped, line in FROM_IMPORT.findall(code):
            for entry in re.sub(r"#[^\n]*", "", wrapped or line).split(","):
                name = entry.split(" as ")[0].strip()
                if name and name != "*":
                    yield f"{module}.{name}"


def _check_dotted(text: str, *, old_paths_allowed: bool) -> Iterator[str]:
    for ref in sorted(set(_dotted_references(text))):
        if ref in GROUPS:
            continue
        found, old = resolve(ref)
        if not found:
            yield f"{ref}: no such module or attribute"
        elif old and not old_paths_allowed:
            yield f"{ref}: an old path ({old})"


def _package_dirs() -> set[str]:
    package = ROOT / "effectbench"
    return {d.name for d in package.iterdir() if d.is_dir() and (d / "__init__.py").exists()}


PACKAGE_DIRS = _package_dirs()


def _files_named(name: str) -> list[Path]:
    hits = [hit for tree in SOURCE_TREES for hit in ROOT.joinpath(tree).rglob(name)]
    return hits + sorted(ROOT.glob(f"examples/*/{name}"))  # flat: not into their installs


def _path_of(path: str) -> Path | None | bool:
    """The file a span names; None when it names none; False when the span is no path."""
    if " " in path or path.endswith("/") or "." not in path.rpartition("/")[2]:
        return False
    if path.startswith(ROOTS):
        hit = ROOT / path
        return hit if hit.exists() else None
    first = path.split("/")[0]
    if "/" in path and first in PACKAGE_DIRS:
        hit = ROOT / "effectbench" / path
        return hit if hit.exists() else None
    if "/" in path and first.startswith("effectbench_"):
        hits = [p for p in ROOT.joinpath("providers").glob(f"*/{path}")]
        hits += list(ROOT.joinpath("plugins_example").glob(path))
        return hits[0] if hits else None
    if "/" not in path and path.endswith(".py"):
        hits = _files_named(path)
        return hits[0] if hits else None
    return False


def _defines(path: Path, member: str) -> bool:
    tree = ast.parse(path.read_text("utf-8"))
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return any(isinstance(node, kinds) and node.name == member for node in ast.walk(tree))


def _check_paths(text: str) -> Iterator[str]:
    for span in SPAN.finditer(text):
        path, _, member = span.group(1).strip().partition("::")
        found = _path_of(path)
        if found is False:
            continue
        if found is None:
            yield f"{path}: no such file"
        elif member and isinstance(found, Path) and not _defines(found, member):
            yield f"{path}::{member}: no such function or class in {found.relative_to(ROOT)}"


def stale(text: str, *, old_paths_allowed: bool = False) -> list[str]:
    return [*_check_dotted(text, old_paths_allowed=old_paths_allowed), *_check_paths(text)]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)).removeprefix("docs/"))
def test_every_code_reference_in_the_docs_resolves(doc: Path) -> None:
    text = doc.read_text("utf-8")
    assert stale(text, old_paths_allowed=doc.name == OLD_PATHS_DOC) == []


def test_the_check_finds_what_went_stale() -> None:
    text = """
The hash covers `effectbench.run.plan.IDENTITY_KEYS`, once `effectbench.plan.IDENTITY_KEYS`.
Through `effectbench.events.SCHEMA_MAJOR`; groups: `effectbench.providers`.
Files: `run/scheduler.py`, `run/gone.py`, `tests/log/test_log.py::no_such_test`,
`effectbench_mockmed/tasks.py`, `scheduler.py`, `nowhere.py`; no paths: `events.jsonl`.
```python
from effectbench.model import TaskSpec, NoSuchName
from effectbench.provider import (
    EnvHandle,  # a comment
    Telemetry as T,
)
import effectbench.testing.InMemoryProvider
```
"""
    old = (
        "effectbench.events.SCHEMA_MAJOR is deprecated (removed in effectbench 0.3): "
        "import SCHEMA_MAJOR from effectbench.core.events"
    )
    assert stale(text) == [
        f"effectbench.events.SCHEMA_MAJOR: an old path ({old})",
        "effectbench.model.NoSuchName: no such module or attribute",
        "effectbench.plan.IDENTITY_KEYS: no such module or attribute",
        "run/gone.py: no such file",
        "tests/log/test_log.py::no_such_test: no such function or class in tests/log/test_log.py",
        "nowhere.py: no such file",
    ]
