"""The example provider run end to end through the real CLI, as a newcomer would run it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from effectbench_example_notes import TASKS

from effectbench.model import Category

TRIALS = 3


def test_both_baselines_run_on_the_example_provider(tmp_path: Path) -> None:
    out = tmp_path / "run"
    cli = Path(sys.executable).with_name("effectbench")
    args = [
        "run",
        "--provider",
        "example-notes",
        "--arm",
        "screen_only",
        "--arm",
        "effect_verified",
    ]
    args += ["--trials", str(TRIALS), "--concurrency", "4", "--out", str(out)]
    proc = subprocess.run(
        [str(cli), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    )

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["schema"] == "effectbench.metrics/1"
    episodes = len(TASKS) * TRIALS
    c1_trials = sum(t.category is Category.C1_PARTIAL_SAVE for t in TASKS) * TRIALS
    screen = metrics["arms"]["screen_only"]["swer"]
    verified = metrics["arms"]["effect_verified"]["swer"]
    # screen_only trusts "Saved" and is silently wrong on every clipped note; effect_verified
    # reads the app's own readback, sees the cut body and halts instead.
    assert (screen["numerator"], screen["denominator"]) == (c1_trials, episodes)
    assert (verified["numerator"], verified["denominator"]) == (0, episodes)
