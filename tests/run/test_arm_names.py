"""``--arm NAME=exec:...`` names a protocol agent, so two agents whose files share a name
(``a/agent.py``, ``b/agent.py``) run side by side; on main they were "named twice"."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from effectbench_mockmed import PINNED

from effectbench.agents.exec import ExecArm
from effectbench.core.exitcodes import ExitCode
from effectbench.core.rundir import RunDir
from effectbench.run.registry import Registry
from effectbench.testing import run_cli

REFERENCE = Path(__file__).parents[2] / "effectbench" / "agents" / "reference"
HALTER = """\
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("type") == "episode":
        print(json.dumps({"type": "report", "episode_id": msg["episode_id"],
                          "reported_success": False, "halted": True, "message": "b halts"}),
              flush=True)
"""


def _agents(root: Path) -> tuple[Path, Path]:
    a, b = root / "a" / "agent.py", root / "b" / "agent.py"
    a.parent.mkdir()
    b.parent.mkdir()
    shutil.copy(REFERENCE / "effect_verified.py", a)
    b.write_text(HALTER)
    return a, b


def _rows(run: Path) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for line in RunDir(run).results.read_bytes().splitlines():
        row = orjson.loads(line)
        out.setdefault(row["arm"], {})[row["task_id"].removeprefix("mockmed::")] = row
    return out


@pytest.mark.timeout(240)
def test_two_agents_whose_files_share_a_name_run_side_by_side_when_named(tmp_path: Path) -> None:
    a, b = _agents(tmp_path)
    py = sys.executable
    unnamed = run_cli(
        "run", "--arm", f"exec:{py} {a}", "--arm", f"exec:{py} {b}", "--trials", "1",
        "--no-report", "--out", str(tmp_path / "clash"), "-q", cwd=tmp_path,
    )  # fmt: skip
    assert unnamed.returncode == ExitCode.USAGE, unnamed.stderr
    assert "arm 'exec:agent' is named twice" in unnamed.stderr
    assert f"--arm NAME=exec:{py} {b}" in unnamed.stderr  # says how to name them apart
    assert "Traceback" not in unnamed.stderr and not (tmp_path / "clash").exists()

    run = tmp_path / "run"
    named = run_cli(
        "run", "--arm", f"agent-a=exec:{py} {a}", "--arm", f"agent-b=exec-each:{py} {b}",
        "--trials", "1", "--no-report", "--out", str(run), "-q", cwd=tmp_path,
    )  # fmt: skip
    assert named.returncode == ExitCode.OK, named.stderr
    rows = _rows(run)
    assert set(rows) == {"agent-a", "agent-b"}
    pinned = dict(PINNED["effect_verified"].per_mode)
    assert {mode: row["outcome"] for mode, row in rows["agent-a"].items()} == pinned
    assert {row["halted"] for row in rows["agent-b"].values()} == {True}
    started = orjson.loads(RunDir(run).log.read_bytes().split(b"\n", 1)[0])["data"]
    # the plan keeps each arm's spec, so --resume and other executors rebuild it by name
    specs = started["plan"]["refs"]["arms"]
    assert specs == [f"agent-a=exec:{py} {a}", f"agent-b=exec-each:{py} {b}"]
    rebuilt = [Registry().arm(spec) for spec in specs]
    assert [r.name for r in rebuilt] == ["agent-a", "agent-b"]


def test_every_exec_form_takes_a_name_and_a_bad_one_is_one_line(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text("")
    forms = {
        "exec:": ("shared", False),
        "exec-each:": ("per_episode", False),
        "exec+browser:": ("shared", True),
        "exec-each+browser:": ("per_episode", True),
    }
    for prefix, (mode, browser) in forms.items():
        arm = ExecArm.from_spec(f"mine.v2={prefix}python {script} --flag=x")
        assert (arm.name, arm.mode, arm.uses_browser_cdp) == ("mine.v2", mode, browser)
        assert arm.argv == ("python", str(script), "--flag=x")
    # an '=' inside the command line names nothing
    assert ExecArm.from_spec(f"exec:python {script} --x=exec:y").name == "exec:agent"
    for bad in ("my agent", "a::b", "x/y", ""):
        proc = run_cli(
            "run", "--arm", f"{bad}=exec:python {script}", "--out", str(tmp_path / "r"),
            cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == ExitCode.USAGE, (bad, proc.stderr)
        lines = [x for x in proc.stderr.splitlines() if x.strip()]
        assert len(lines) == 1 and "must be 1-64 letters, digits or _ . + -" in lines[0], (
            bad,
            proc.stderr,
        )
