"""verify's memory does not grow with the run: what it keeps per episode lives on disk.

The results check (every row of results.jsonl against its twin rebuilt from the log) is
where verify used to grow: it held every rebuilt row in a dict, 343 MB of RSS at 100k
episodes (bench/verify_memory.py). Measured here with tracemalloc (allocations, not
RSS: the same on a loaded machine) over two MockMed-shaped runs, one four times the
other: the check's heap peak stays within 1.5x, and a whole verify of the larger run
is sound and contained."""

from __future__ import annotations

import shutil
import tracemalloc
from pathlib import Path

import pytest

from effectbench.audit.attest import attestations
from effectbench.outputs.artifacts import RESULTS_FILE, build_artifacts
from effectbench.testing import biglog
from effectbench.verify import verify_run
from effectbench.verify.compare import Reasons
from effectbench.verify.results_check import compare_results
from effectbench.verify.scratch import Scratch


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("runs")
    (root / "template").mkdir()
    template = biglog.record_template(root / "template")
    made = {}
    for episodes in (1000, 4000):
        run_dir = root / f"run-{episodes}"
        biglog.make_log(run_dir, template, episodes=episodes)
        build_artifacts(run_dir, attest=attestations)
        made[episodes] = run_dir
    return made


def _peak_of_results_check(run_dir: Path, scratch_dir: Path) -> int:
    rebuilt = scratch_dir / "rebuilt.jsonl"
    shutil.copyfile(run_dir / RESULTS_FILE, rebuilt)
    scratch = Scratch(scratch_dir)
    reasons = Reasons()
    tracemalloc.start()
    try:
        compare_results(run_dir / RESULTS_FILE, rebuilt, scratch, reasons)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        scratch.close()
    assert reasons.close() == []
    return peak


def test_results_check_heap_is_flat_in_the_number_of_episodes(
    runs: dict[int, Path], tmp_path: Path
) -> None:
    peaks = []
    for episodes, run_dir in sorted(runs.items()):
        (tmp_path / str(episodes)).mkdir()
        peaks.append(_peak_of_results_check(run_dir, tmp_path / str(episodes)))
    small, large = peaks
    assert large < 1.5 * small, f"the results check's heap grew {large / small:.2f}x for 4x"


def test_a_large_run_verifies_sound(runs: dict[int, Path]) -> None:
    report = verify_run(runs[4000])
    assert report.ok, report.reasons
    assert report.uncontained == []  # its arms are the harness's baselines, as recorded
