"""``--arm myarms:MyArm`` names a module in the current folder, as docs/writing-an-arm.md
shows, without ``PYTHONPATH=.``: the console script's ``sys.path`` starts at its ``bin/``,
not at the folder the user is in (issue 30 item 5)."""

from __future__ import annotations

import os
from pathlib import Path

import orjson

from effectbench.testing import run_cli

MY_ARMS = """
from effectbench.arms.baselines import EffectVerifiedArm


class MyArm(EffectVerifiedArm):
    name = "mine"
"""


def _env_without_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def test_an_arm_module_in_the_current_folder_runs_without_pythonpath(tmp_path: Path) -> None:
    (tmp_path / "myarms.py").write_text(MY_ARMS)
    proc = run_cli(
        "run",
        "--arm",
        "myarms:MyArm",
        "--task",
        "mockmed::ok",
        "--trials",
        "1",
        "--out",
        "run",
        "--no-report",
        "-q",
        cwd=tmp_path,
        env=_env_without_pythonpath(),
    )
    assert proc.returncode == 0, proc.stderr
    rows = [
        orjson.loads(line)
        for line in (tmp_path / "run" / "results.jsonl").read_bytes().splitlines()
    ]
    assert {row["arm"] for row in rows} == {"mine"}


def test_a_module_found_nowhere_says_where_it_was_looked_for(tmp_path: Path) -> None:
    proc = run_cli(
        "run",
        "--arm",
        "notmyarms:MyArm",
        "--out",
        "run",
        "-q",
        cwd=tmp_path,
        env=_env_without_pythonpath(),
    )
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert len(line.splitlines()) == 1 and "Traceback" not in line
    assert f"in {tmp_path}" in line and "notmyarms.py" in line
