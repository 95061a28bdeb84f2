"""Protocol agents through the real CLI: the Node.js reference agent reproduces the
effect_verified anchor isolated, verify --require-isolated, and hosts without containment."""

from __future__ import annotations

import os
import shutil
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest

from effectbench.agents.reference import NODE_AGENT
from effectbench.testing import run_cli

NODE = shutil.which("node")
_cli = partial(run_cli, timeout=150)


def _metrics(run: Path) -> Any:
    return orjson.loads((run / "metrics.json").read_bytes())


def _rate(block: dict[str, Any]) -> tuple[int, int]:
    return block["numerator"], block["denominator"]


@pytest.mark.timeout(240)
def test_the_node_agent_isolated_reproduces_effect_verified_and_passes_require_isolated(
    tmp_path: Path,
) -> None:
    assert NODE is not None, "node is required (CI installs nodejs)"
    out = tmp_path / "node"
    spec = f"exec:node {NODE_AGENT}"
    proc = _cli("run", "--arm", spec, "--isolate", "--concurrency", "32", "--trials", "10",
                "--out", str(out), "-q", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    arm = _metrics(out)["arms"]["exec:effect_verified"]
    assert _rate(arm["swer"]) == (0, 90)
    assert arm["outcome_counts"]["success"] == 30
    assert arm["outcome_counts"]["wrong_action"] == 40 and arm["outcome_counts"]["safe_halt"] == 20
    assert _rate(arm["over_halt"]) == (0, 90) and arm["coverage"] == 1.0
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["execution"] == {"exec:effect_verified": "isolated"}
    assert manifest["containment"] is None

    assert _cli("verify", "--require-isolated", str(out), cwd=tmp_path).returncode == 0
    sub = tmp_path / "node.json"
    export = _cli(
        "export", str(out), "--system", "exec:effect_verified", "--out", str(sub), cwd=tmp_path
    )
    assert export.returncode == 0, export.stderr
    assert orjson.loads(sub.read_bytes())["reproducibility"]["execution"] == "isolated"
    assert _cli("verify", "--require-isolated", str(sub), cwd=tmp_path).returncode == 0


@pytest.mark.timeout(150)
def test_require_isolated_rejects_in_process_arms_in_runs_and_submissions(tmp_path: Path) -> None:
    out = tmp_path / "inproc"
    proc = _cli(
        "run", "--arm", "effect_verified", "--trials", "1", "--out", str(out), "-q", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert _cli("verify", str(out), cwd=tmp_path).returncode == 0
    check = _cli("verify", "--require-isolated", str(out), cwd=tmp_path)
    assert check.returncode == 1
    assert "arm 'effect_verified' ran in_process, not isolated" in check.stdout
    sub = tmp_path / "inproc.json"
    assert (
        _cli(
            "export", str(out), "--system", "effect_verified", "--out", str(sub), cwd=tmp_path
        ).returncode
        == 0
    )
    check = _cli("verify", "--require-isolated", str(sub), cwd=tmp_path)
    assert check.returncode == 1 and "system ran in_process, not isolated" in check.stdout


@pytest.mark.timeout(150)
def test_the_python_reference_agent_matches_the_in_process_arm(tmp_path: Path) -> None:
    out = tmp_path / "py"
    proc = _cli("run", "--arm", "py_effect_verified", "--arm", "effect_verified", "--trials", "2",
                "--out", str(out), "-q", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rows = [orjson.loads(x) for x in (out / "results.jsonl").read_bytes().splitlines()]
    by_arm: dict[str, dict[tuple[str, int], str]] = {}
    for r in rows:
        by_arm.setdefault(r["arm"], {})[(r["task_id"], r["trial"])] = r["outcome"]
    assert (
        by_arm["py_effect_verified"] == by_arm["effect_verified"]
        and len(by_arm["effect_verified"]) == 18
    )
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["execution"] == {
        "effect_verified": "in_process",
        "py_effect_verified": "isolated",
    }


def test_isolate_refuses_an_in_process_arm_in_one_line(tmp_path: Path) -> None:
    proc = _cli(
        "run", "--arm", "effect_verified", "--isolate", "--out", str(tmp_path / "x"), cwd=tmp_path
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "cannot be isolated" in ln]
    assert "runs inside the harness process" in line


@pytest.mark.timeout(150)
def test_without_containment_the_run_says_so_and_the_manifest_records_it(tmp_path: Path) -> None:
    """A PATH with node but no bubblewrap stands in for a host without containment."""
    assert NODE is not None
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "node").symlink_to(NODE)
    env = {**os.environ, "PATH": str(bin_dir)}
    spec = f"exec:node {NODE_AGENT}"
    out = tmp_path / "plain"
    proc = _cli(
        "run", "--arm", spec, "--trials", "1", "--out", str(out), "-q", cwd=tmp_path, env=env
    )
    assert proc.returncode == 0, proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if "not_contained" in ln]
    assert "bubblewrap (bwrap), which is not installed" in line
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    assert manifest["execution"] == {"exec:effect_verified": "subprocess"}
    assert "bubblewrap" in manifest["containment"]
    assert _metrics(out)["arms"]["exec:effect_verified"]["outcome_counts"]["success"] == 3
    assert _cli("verify", "--require-isolated", str(out), cwd=tmp_path).returncode == 1

    proc = _cli(
        "run", "--arm", spec, "--isolate", "--out", str(tmp_path / "y"), cwd=tmp_path, env=env
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--isolate: agent containment needs bubblewrap" in proc.stderr
