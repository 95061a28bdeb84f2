"""A SIGKILL of the harness, on every path, leaves no process of the run alive and
nothing of it outside the run directory and its state root, and the next resume of
that run removes what the state root holds.

Each run is started under tests/reaper.py, a child subreaper: every process the run
starts is reparented to it when its parent dies, however it detached, so "no process
survives" is checked over the whole tree, not a guessed list of names. The harness
runs in a private mount namespace whose /dev/shm is a directory of this test (bound
over it), with $TMPDIR another, so what the run leaves in either is exactly what is
there afterwards, whatever else runs on the machine. Needs root (CI runs as root).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import orjson
import pytest
from cli_env import TESTS

from effectbench.testing import effectbench_command

DEADLINE_S = 120.0
"""Bound on waiting for the run to get going; a passing test is far from it."""
REAPER = TESTS / "reaper.py"
AGENT = TESTS.parent / "effectbench" / "agents" / "reference" / "effect_verified.py"

PATHS: Mapping[str, tuple[str, ...]] = {
    "mockmed": ("--provider", "mockmed", "--arm", "effect_verified", "--trials", "40"),
    "mockmed-pg": ("--provider", "mockmed-pg", "--arm", "effect_verified", "--trials", "20"),
    "browser": ("--provider", "mockmed", "--arm", "browser_screen_only", "--trials", "6"),
    "exec agent": (
        "--provider", "mockmed", "--arm", f"exec:{sys.executable} {AGENT}", "--trials", "20",
    ),
    "roundup": (
        "--provider", "roundup", "--arm", "effect_verified", "--trials", "1",
        "--task", "roundup::csrf::open::*", "--concurrency", "2",
    ),
    "roundup-admin install": (
        "--provider", "roundup", "--arm", "effect_verified", "--trials", "1",
        "--task", "roundup::csrf::open::ok",
    ),
    "dask-local": (
        "--provider", "mockmed", "--arm", "effect_verified", "--trials", "40",
        "--executor", "dask-local:2",
    ),
}  # fmt: skip


def _command(shm: Path, args: tuple[str, ...]) -> list[str]:
    """The harness in a mount namespace of its own, ``shm`` bound over its /dev/shm, as
    the reaper's one child."""
    bind = 'mount --bind "$0" /dev/shm && exec "$@"'
    return [
        sys.executable, str(REAPER), "30",
        "unshare", "--mount", "--propagation", "private",
        "sh", "-c", bind, str(shm), *effectbench_command(), *args,
    ]  # fmt: skip


def _env(tmp: Path) -> dict[str, str]:
    drop = {"EFFECTBENCH_STATE_DIR", "EFFECTBENCH_MOCKMED_TMPDIR", "EFFECTBENCH_ROUNDUP_TMPDIR"}
    env = {
        k: v for k, v in os.environ.items() if k not in drop and not k.startswith("EFFECTBENCH_PG")
    }
    return {**env, "TMPDIR": str(tmp)}


def _provisioned(log: Path) -> int:
    try:
        return log.read_bytes().count(b'"episode.provisioned"')
    except OSError:
        return 0


def _running(harness: int, needle: bytes) -> bool:
    """Whether a descendant of ``harness`` runs a command line holding ``needle``."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(stat[1])
            except (OSError, IndexError):
                continue
    for pid in parents:
        up = pid
        while up in parents and up != harness:
            up = parents[up]
        if up == harness and pid != harness:
            try:
                if needle in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return True
            except OSError:
                continue
    return False


def _ready(path: str, harness: int, log: Path) -> bool:
    """The moment to kill: the tracker's install running, else two episodes provisioned."""
    if path == "roundup-admin install":
        return _running(harness, b"install\0classic")
    return _provisioned(log) >= 2


def _everything(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _start(tmp_path: Path, args: tuple[str, ...]) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        _command(tmp_path / "shm", args),
        env=_env(tmp_path / "tmp"),
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    return proc


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """The harness's exit status, and what the reaper said of its tree after it."""
    out, _ = proc.communicate(timeout=DEADLINE_S)
    lines = out.splitlines()
    status = next(int(x.split()[1]) for x in lines if x.startswith("status "))
    return status, out


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", list(PATHS))
def test_a_sigkilled_run_leaves_nothing_and_its_resume_cleans_up(path: str, tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail(
            "a private /dev/shm needs root: run the tests as root, as `make test` in CI does"
        )
    if shutil.which("unshare") is None:
        pytest.fail("a private /dev/shm needs unshare(1): install util-linux")
    (tmp_path / "shm").mkdir()
    (tmp_path / "tmp").mkdir()
    run = tmp_path / "run"
    proc = _start(tmp_path, ("run", *PATHS[path], "--out", str(run), "-q"))
    assert proc.stdout is not None
    harness = int(proc.stdout.readline())
    end = time.monotonic() + DEADLINE_S
    while not _ready(path, harness, run / "events.jsonl"):
        assert proc.poll() is None, "the run ended before it was killed"
        assert time.monotonic() < end, "no episode was provisioned in time"
        time.sleep(0.02)  # polling a file with a bounded deadline, not ordering by sleep
    os.kill(harness, signal.SIGKILL)
    status, out = _finish(proc)
    assert "survivor" not in out and out.strip().endswith("clean"), out
    assert status == -signal.SIGKILL
    if path == "roundup-admin install":  # killed with the harness, not left to finish
        assert f"reaped roundup-admin {-signal.SIGKILL}" in out, out

    run_id = orjson.loads((run / "events.jsonl").read_bytes().splitlines()[0])["data"]["run_id"]
    roots = [p.name for p in (tmp_path / "shm").iterdir()]
    outside = [n for n in roots if run_id.replace(":", "_") not in n]
    assert outside == [], f"left in /dev/shm outside the state root: {outside}"
    assert (left := _everything(tmp_path / "tmp")) == [], f"left in $TMPDIR: {left}"

    proc = _start(tmp_path, ("run", "--resume", str(run), "-q"))
    assert proc.stdout is not None
    proc.stdout.readline()
    status, out = _finish(proc)
    assert out.strip().endswith("clean"), out
    assert status == 0
    assert _everything(tmp_path / "shm") == [], "the resume left /dev/shm with something"
    assert _everything(tmp_path / "tmp") == [], "the resume left $TMPDIR with something"
