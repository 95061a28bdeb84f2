"""Shared by the desktop and remote_display tests: a real run of mockmed-substrates
SIGKILLed once its displays and clients are up, and what of it survived."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from processes import _comm, _descendants, sigkill_survivors

from effectbench.testing.cli import effectbench_command

DEADLINE_S = 60.0


def gtk_clients(tree: dict[int, int]) -> list[int]:
    """MockMed's desktop clients among ``tree`` (system python running gtk_client.py)."""
    found = []
    for pid in tree:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(a.endswith(b"gtk_client.py") for a in argv):
            found.append(pid)
    return found


def killed_run_survivors(
    tmp_path: Path, tasks: str, processes: Sequence[str]
) -> list[tuple[int, str]]:
    """Start a long run of ``tasks`` at concurrency 8, wait until two desktop clients
    and every one of ``processes`` run, SIGKILL it: the processes of it still alive."""
    argv = [
        *effectbench_command(), "run", "--provider", "mockmed-substrates",
        "--task", tasks, "--arm", "screen_only", "--trials", "200",
        "--concurrency", "8", "--out", str(tmp_path / "killed"), "--no-report",
    ]  # fmt: skip
    harness = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        tree: dict[int, int] = {}
        names: list[str] = []
        while time.monotonic() < deadline:
            tree = _descendants(harness.pid)
            names = [_comm(pid) for pid in tree]
            if len(gtk_clients(tree)) >= 2 and all(n in names for n in processes):
                break
            assert harness.poll() is None, "the run ended before its displays were up"
            time.sleep(0.05)
        else:
            raise AssertionError(f"no desktop clients within {DEADLINE_S:g} s: {sorted(names)}")
        return [(pid, _comm(pid)) for pid in sigkill_survivors(harness, tree)]
    finally:
        harness.kill()
        harness.wait()


def rate(block: dict[str, Any]) -> tuple[int, int]:
    """A metric's (numerator, denominator) in metrics.json."""
    return block["numerator"], block["denominator"]


def outcomes(metrics: dict[str, Any]) -> dict[str, object]:
    """Every arm's outcome counts, overall and per (category x substrate) cell."""
    return {
        arm: (
            block["outcome_counts"],
            [(c["category"], c["substrate"], c["outcome_counts"]) for c in block["cells"]],
        )
        for arm, block in metrics["arms"].items()
    }
