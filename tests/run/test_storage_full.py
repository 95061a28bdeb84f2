"""A full disk under the run directory is the harness's storage failing, never an
episode's failure: the episode it cut off stays unfinished, the run stops at the first
such error with the disk-full message (exit 6), and once space is freed `--resume`
runs the rest, so the run ends with every episode scored and the same labels as a run
that never hit the full disk. The disk is a real tmpfs of a few hundred KB (mounting
needs root, as CI runs)."""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_env import TESTS, pythonpath_env

# The CLI subprocess imports plugins from this test module itself.
HERE = Path(__file__).resolve().parent

from effectbench.core.arm import TaskView
from effectbench.core.exitcodes import ExitCode
from effectbench.core.model import AgentReport
from effectbench.core.provider import EnvHandle
from effectbench.testing import InMemoryProvider, ScriptedArm, run_cli

SHOT = 32 * 1024
"""Bytes per screenshot: a few of them fill the disk."""
DISK = 2 * 1024 * 1024


class ShotArm(ScriptedArm):
    """Submits the solution and keeps one screenshot of its own (bytes unique per episode,
    so every one is stored)."""

    name = "shots"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        report = await super().run(task, env)
        seed = hashlib.sha256(task.episode_id.encode()).digest()
        env.telemetry.screenshot(seed * (SHOT // len(seed)), "after submit")
        return report


def two_tasks() -> InMemoryProvider:
    return InMemoryProvider(("ok", "phantom"))


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.fail(
            "mounting a small tmpfs needs root: run the tests as root, as `make test` in CI does"
        )
    disk = tmp_path / "disk"
    disk.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK}", "tmpfs", str(disk)], check=True)
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _fill(disk: Path, leave: int) -> Path:
    """A filler file that leaves about ``leave`` bytes free on ``disk``."""
    st = os.statvfs(disk)
    filler = disk / "filler"
    filler.write_bytes(b"\0" * max(0, st.f_bavail * st.f_frsize - leave))
    return filler


def _run(out: Path, arm: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "run", "--provider", f"{__name__}:two_tasks",
        "--arm", arm, "--trials", "12", "--concurrency", "3", "--out", str(out), "-q", *extra,
        env=pythonpath_env(TESTS, HERE), cwd=out.parent,
    )  # fmt: skip


def _labels(run: Path) -> dict[str, Any]:
    rows = [orjson.loads(x) for x in (run / "results.jsonl").read_bytes().splitlines()]
    keep = ("outcome", "true_state", "failure_class", "reported_success")
    return {r["episode_id"]: {k: r.get(k) for k in keep} for r in rows}


@pytest.mark.parametrize(
    ("arm", "leave"),
    [("test_storage_full:ShotArm", 160 * 1024), ("effectbench.testing:ScriptedArm", 12 * 1024)],
    ids=["a screenshot cannot be stored", "the log cannot be written"],
)
def test_a_full_disk_stops_the_run_and_resume_finishes_it(
    arm: str, leave: int, small_disk: Path, tmp_path: Path
) -> None:
    filler = _fill(small_disk, leave)
    out = small_disk / "run"
    proc = _run(out, arm)
    assert proc.returncode == ExitCode.STORAGE, (proc.returncode, proc.stderr)
    last = proc.stderr.strip().splitlines()[-1]
    assert "No space left on device" in last and f"run --resume {out}" in last, proc.stderr
    assert "Traceback" not in proc.stderr
    log = (out / "events.jsonl").read_bytes()
    assert b"Errno 28" not in log and b'"stage":"harness"' not in log
    assert not (out / "results.jsonl").exists()
    verified = run_cli("verify", str(out))  # never sound, nor complete
    assert verified.returncode == ExitCode.FAILED, verified
    assert verified.stdout.startswith("NOT sound"), verified

    filler.unlink()
    proc = _run_resume(out)
    assert proc.returncode == 0, proc.stderr
    reference = tmp_path / "reference"
    assert _run(reference, arm).returncode == 0
    assert _labels(out) == _labels(reference)
    assert len(_labels(out)) == 24
    assert all(v["failure_class"] is None for v in _labels(out).values())


def _run_resume(out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "run", "--resume", str(out), "-q", env=pythonpath_env(TESTS, HERE), cwd=out.parent
    )
