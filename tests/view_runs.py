"""A folder of runs for the viewer's tests (tests/viewer/): small synthetic runs with their
artifacts and reports built, two of one plan (comparable), one of another, and runs whose
artifacts are broken in each way the index must explain."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
from synthetic_run import make_plan, read_rows, write_run

from effectbench.api import build_outputs
from effectbench.core.model import TaskSpec
from effectbench.testing.cli import effectbench_command

SECRET = "viewer-test-secret-8c1f"
"""Written outside the viewed folder; no response may ever contain it."""
BROKEN = {
    "broken/no-metrics": "metrics.json is missing",
    "broken/bad-metrics": "metrics.json is not JSON",
    "broken/no-arms": "lacks a figure the index shows",
    "broken/no-log": "holds no events.jsonl",
}
"""Each broken run and the words its row must say (each row names the fix as well)."""


def _all_success(arm: str, task: TaskSpec, trial: int) -> str:
    return "success" if task.task_id != "ctl-none" else "over_halt"


def view_folder(root: Path) -> Path:
    """``root/runs`` holding runs a and b (one plan), other (another plan), broken/*; a
    secret file beside it and a link from inside pointing at it."""
    runs = root / "runs"
    build_outputs(write_run(runs / "a"))
    build_outputs(write_run(runs / "b", scenario=_all_success))
    build_outputs(write_run(runs / "sweep" / "other", make_plan(["screen_only"], trials=2)))
    for name in BROKEN:
        shutil.copytree(runs / "a", runs / name)
    (runs / "broken/no-metrics/metrics.json").unlink()
    (runs / "broken/bad-metrics/metrics.json").write_bytes(b"{not json")
    metrics = orjson.loads((runs / "a/metrics.json").read_bytes())
    del metrics["arms"]
    (runs / "broken/no-arms/metrics.json").write_bytes(orjson.dumps(metrics))
    (runs / "broken/no-log/events.jsonl").unlink()
    (root / "secret.txt").write_text(SECRET)
    os.symlink(root / "secret.txt", runs / "a" / "escape.txt")
    os.symlink(root, runs / "outside")
    return runs


def swer_episodes(run: Path, arm: str) -> list[str]:
    """The episode ids of ``arm``'s silent wrong effects, from results.jsonl."""
    return [
        r["episode_id"]
        for r in read_rows(run)
        if r["arm"] == arm and r["outcome"] == "SILENT_WRONG_EFFECT"
    ]


def tree(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and mtime, to show nothing was written."""
    out = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = Path(dirpath) / name
            st = path.lstat()
            out[str(path.relative_to(root))] = (st.st_size, st.st_mtime_ns)
    return out


@contextmanager
def served(runs: Path, *extra: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``effectbench view RUNS`` as a real process: (the process, the URL it printed).
    Stopped with SIGINT (Ctrl-C) afterwards unless the test already stopped it."""
    proc = subprocess.Popen(
        [*effectbench_command(), "view", str(runs), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout is not None else ""
        if not line.startswith("viewer: http://127.0.0.1:"):
            proc.kill()
            raise AssertionError(f"the viewer did not start: {line!r} {proc.communicate()}")
        yield proc, line.split()[1]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
