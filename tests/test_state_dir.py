"""Providers keep per-episode state under the run's state root; after a SIGKILL the next
resume of that run deletes what the killed session left (MockMed's episode databases)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson

EXE = Path(sys.executable).with_name("effectbench")


def _wait_for_provisioned(log: Path, proc: subprocess.Popen[bytes], n: int) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if log.exists() and log.read_bytes().count(b'"episode.provisioned"') >= n:
            return
        assert proc.poll() is None, "the run ended before it was killed"
        time.sleep(0.05)  # polling a file with a bounded deadline, not ordering by sleep
    raise AssertionError("no episode was provisioned in time")


def test_a_resume_after_sigkill_leaves_no_stale_episode_files(tmp_path: Path) -> None:
    env = {**os.environ, "EFFECTBENCH_STATE_DIR": str(tmp_path / "state")}
    env.pop("EFFECTBENCH_MOCKMED_TMPDIR", None)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [str(EXE), "run", "--trials", "40", "--concurrency", "4", "--out", str(out), "-q"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for_provisioned(out / "events.jsonl", proc, 6)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    run_id = orjson.loads(out.joinpath("events.jsonl").read_bytes().splitlines()[0])["data"][
        "run_id"
    ]
    from effectbench.run.statedir import state_root

    os.environ["EFFECTBENCH_STATE_DIR"] = env["EFFECTBENCH_STATE_DIR"]
    try:
        root = state_root(run_id, out)
    finally:
        del os.environ["EFFECTBENCH_STATE_DIR"]
    stale = [p for p in root.rglob("*") if p.is_file()]
    assert stale, "the killed run left no episode files: the test would prove nothing"
    done = subprocess.run(
        [str(EXE), "run", "--resume", str(out), "-q"],
        env=env,
        capture_output=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert not root.exists()
    assert not any((tmp_path / "state").iterdir())


def test_two_runs_of_one_plan_in_one_second_get_their_own_state_roots(tmp_path: Path) -> None:
    """The run id is the start second and the plan hash, so two identical runs started
    together share it; their state roots must still differ, or one run's start (which
    empties its root) deletes the other's databases mid-run."""
    from effectbench.run.statedir import state_root

    run_id = "20261201T121629Z-89124113"
    a, b = state_root(run_id, tmp_path / "a"), state_root(run_id, tmp_path / "b")
    assert a != b
    assert state_root(run_id, tmp_path / "a") == a  # a resume finds its own again
    assert state_root(run_id, tmp_path / "x" / ".." / "a") == a
