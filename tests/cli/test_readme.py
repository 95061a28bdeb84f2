"""README.md runs as written (issue 30): every ```sh block after the quick start, in
order, in an empty directory with this checkout's venv first on PATH, real processes.
The quick start (``make demo``, ``make test``) is not run here: it sets up the clone
and runs this very suite, and ``.ci/run`` runs both commands as written on its clean
clone. What cannot run in a script (a server of the reader's, Ctrl-C) is a ```text
block, which the README says is shown, not run."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_commands import ROOT, run_block, shell_blocks

README = ROOT / "README.md"
QUICK_START = ("make demo", "make test")


@pytest.fixture
def reader_dir() -> Iterator[Path]:
    """An empty directory others may traverse, as a clone in a home directory is: the
    contained agent's sandbox binds it, which pytest's 0700 tmp_path is not."""
    with tempfile.TemporaryDirectory(prefix="readme-") as d:
        Path(d).chmod(0o755)
        yield Path(d)


def _commands(block: str) -> list[str]:
    return [line.split("#")[0].strip() for line in block.splitlines() if line.split("#")[0].strip()]


def test_the_readme_shell_blocks_hold_no_placeholders() -> None:
    """A ```sh block is a promise that it runs: no ``...``, no upper-case stand-in."""
    quick, *blocks = shell_blocks(README)
    assert all(c in quick for c in QUICK_START), (
        "the README's first sh block is not the quick start"
    )
    assert blocks, "the README runs no commands"
    for command in (c for block in blocks for c in _commands(block)):
        assert "..." not in command, command
        assert not re.search(r"(?<![-\w])[A-Z]{3,}(?![\w-])", command), command


@pytest.mark.timeout(600)  # about 70 s on an idle 2-core machine
def test_every_readme_command_runs_as_written(reader_dir: Path) -> None:
    _, *blocks = shell_blocks(README)
    for block in blocks:
        proc = run_block(block, reader_dir)
        assert proc.returncode == 0, (
            f"{block}\nexit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    runs = reader_dir / "runs"
    # what the comments say each command leaves behind
    assert (runs / "notes" / "report.html").is_file()
    assert (runs / "index.html").is_file()
    assert (reader_dir / "sub.json").is_file()
    assert (reader_dir / "ledger" / "pyproject.toml").is_file()
    made = {p.name for p in runs.iterdir() if p.is_dir()}
    assert {"notes", "a", "b", "x"} <= made
    assert len(made - {"notes", "a", "b", "x"}) >= 8, "the runs without --out made no runs/<id>/"
