"""docs/tutorial.md runs as written: every ```sh block after the set-up (which CI's
clean clone runs before the suite), in order, in an empty directory, real processes;
and the figures it quotes are the ones its runs produce."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from doc_commands import ROOT, run_block, shell_blocks, text_blocks

TUTORIAL = ROOT / "docs" / "tutorial.md"
SETUP = ("git clone", "make setup", "source .venv/bin/activate")


@pytest.fixture
def reader_dir() -> Iterator[Path]:
    """An empty directory others may traverse, as a clone in a home directory is: the
    agent's sandbox binds the script's directory, which pytest's 0700 reader_dir is not."""
    with tempfile.TemporaryDirectory(prefix="tutorial-") as d:
        Path(d).chmod(0o755)
        yield Path(d)


def _metrics(run: Path) -> dict[str, object]:
    return orjson.loads((run / "metrics.json").read_bytes())  # type: ignore[no-any-return]


@pytest.mark.timeout(600)  # a reader's ten minutes; about 100 s on a loaded 2-core machine
def test_every_command_of_the_tutorial_runs_and_gives_what_it_says(reader_dir: Path) -> None:
    setup, *blocks = shell_blocks(TUTORIAL)
    assert all(s in setup for s in SETUP), "the tutorial's first block is no longer the set-up"
    for block in blocks:
        proc = run_block(block, reader_dir)
        assert proc.returncode == 0, (
            f"{block}\nexit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        )
    quoted = next(t for t in text_blocks(TUTORIAL) if t.startswith("mine:"))
    num, den = map(int, re.search(r"SWER\s+(\d+)/(\d+)", quoted).groups())  # type: ignore[union-attr]
    mine: dict[str, dict[str, int]] = _metrics(reader_dir / "runs" / "mine")["arms"]["mine"]  # type: ignore[index]
    assert (mine["swer"]["numerator"], mine["swer"]["denominator"]) == (num, den)
    assert (reader_dir / "runs" / "mine-vs-baselines.html").is_file()
    assert (reader_dir / "mine-submission.json").is_file()
    # Roundup: the banner-believers are wrong somewhere, effect_verified never silently
    arms = _metrics(reader_dir / "runs" / "roundup")["arms"]
    assert arms["mine"]["swer"]["numerator"] > 0  # type: ignore[index]
    assert arms["screen_only"]["swer"]["numerator"] > 0  # type: ignore[index]
    assert arms["effect_verified"]["swer"]["numerator"] == 0  # type: ignore[index]
