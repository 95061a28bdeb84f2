"""docs/configuration.md lists every environment variable the package and its first-party
providers read, and nothing they do not (issue 30 item 4). The variables are found in the
source with ``ast``: a string constant that is a whole ``EFFECTBENCH_*`` name, a
``*_ENV`` constant's value, a ``{ENV_PREFIX}_NAME`` f-string (and ``{prefix}_NAME`` read
from an ``environ`` mapping, for every module's ``ENV_PREFIX``), and an upper-case literal
read through ``os.environ`` / ``getenv`` / an ``environ`` mapping."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [ROOT / "effectbench", *sorted((ROOT / "providers").glob("*/effectbench_*"))]
DOC = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+")


def _files() -> Iterator[Path]:
    for source in SOURCES:
        yield from sorted(source.rglob("*.py"))


def _constants(tree: ast.Module) -> dict[str, str]:
    """A module's top-level string constants, by name."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                found.update({t.id: value.value for t in targets if isinstance(t, ast.Name)})
    return found


def _prefixes(constants: dict[str, str]) -> set[str]:
    """The ``ENV_PREFIX`` of a module: the start of a family of names."""
    return {value for name, value in constants.items() if name == "ENV_PREFIX"}


def _named(constants: dict[str, str]) -> set[str]:
    """Values of ``*_ENV`` constants (``NODE_ENV = "PLAYWRIGHT_NODEJS_PATH"``)."""
    return {v for n, v in constants.items() if n.endswith("_ENV") and NAME.fullmatch(v)}


def _reads_environ(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "getenv":
        return True
    if isinstance(func, ast.Attribute) and func.attr in {"get", "pop"}:
        owner = ast.unparse(func.value)
        return "environ" in owner or owner in {"env", "os.environ"}
    return False


def _suffixes(node: ast.JoinedStr) -> str | None:
    """``_NAME`` of an f-string ``f"{prefix}_NAME"``, else None."""
    parts = node.values
    if len(parts) == 2 and isinstance(parts[0], ast.FormattedValue):
        tail = parts[1]
        if isinstance(tail, ast.Constant) and NAME.fullmatch("X" + str(tail.value)):
            return str(tail.value)
    return None


def variables_read() -> dict[str, Path]:
    """Every variable name found, and a file that reads it."""
    found: dict[str, Path] = {}
    families: set[str] = set()
    suffixes: set[str] = set()
    for path in _files():
        tree = ast.parse(path.read_text("utf-8"))
        constants = _constants(tree)
        prefixes = _prefixes(constants)
        families |= prefixes
        for name in _named(constants):
            found.setdefault(name, path)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
                if text.startswith("EFFECTBENCH_") and NAME.fullmatch(text):
                    found.setdefault(text, path)
            elif isinstance(node, ast.Call) and _reads_environ(node) and node.args:
                arg = node.args[0]
                if isinstance(arg, ast.Constant) and NAME.fullmatch(str(arg.value)):
                    found.setdefault(str(arg.value), path)
                elif isinstance(arg, ast.JoinedStr) and (tail := _suffixes(arg)):
                    suffixes.add(tail)
            elif isinstance(node, ast.JoinedStr) and (tail := _suffixes(node)):
                head = node.values[0]
                if isinstance(head, ast.FormattedValue) and ast.unparse(head.value) == "ENV_PREFIX":
                    for prefix in prefixes:
                        found.setdefault(prefix + tail, path)
    for prefix in families:
        found.pop(prefix, None)  # a family's start, never read alone
        for tail in suffixes:
            found.setdefault(prefix + tail, ROOT / "effectbench" / "arms" / "llm" / "endpoint.py")
    return found


def documented() -> dict[str, str]:
    """The rows of docs/configuration.md's tables: each name and what applies unset."""
    rows = re.findall(
        r"^\| `([A-Z][A-Z0-9_]+)` \|[^|\n]+\|([^|\n]*)\|$", DOC.read_text("utf-8"), re.MULTILINE
    )
    return {name: unset.strip() for name, unset in rows}


def test_every_variable_read_is_documented_with_its_default() -> None:
    read = variables_read()
    for name in ("EFFECTBENCH_CHROMIUM", "EFFECTBENCH_LLM_BASE_URL", "EFFECTBENCH_CU_FORMAT"):
        assert name in read, f"the scan no longer finds {name}"
    assert "PLAYWRIGHT_BROWSERS_PATH" in read and "EFFECTBENCH_LLM" not in read
    missing = {name: str(path.relative_to(ROOT)) for name, path in read.items()}
    listed = documented()
    for name in listed:
        missing.pop(name, None)
    assert not missing, f"read but not in docs/configuration.md: {missing}"
    assert all(listed.values()), f"no default given: {[n for n, d in listed.items() if not d]}"


def test_every_documented_variable_is_read() -> None:
    stale = set(documented()) - set(variables_read())
    assert not stale, f"docs/configuration.md lists variables nothing reads: {sorted(stale)}"


def test_the_documented_completion_lines_print_a_completion_script() -> None:
    import os
    import subprocess

    from effectbench.testing import effectbench_command

    text = DOC.read_text("utf-8")
    shells = re.findall(r"_EFFECTBENCH_COMPLETE=(\w+_source) effectbench", text)
    assert sorted(shells) == ["bash_source", "fish_source", "zsh_source"]
    for shell in shells:
        proc = subprocess.run(
            effectbench_command(),
            env={**os.environ, "_EFFECTBENCH_COMPLETE": shell},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert proc.returncode == 0 and "_EFFECTBENCH_COMPLETE" in proc.stdout, proc.stderr
