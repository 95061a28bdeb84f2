"""The seals mean what they say (issue 25): a run that measured too little exits
INCOMPLETE and is neither sound to verify nor exportable as a result; a run with an
uncontained arm verifies as "sound, NOT contained"; the threshold is the run's own."""

from __future__ import annotations

import os
import shutil
import socket
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_env import TESTS, pythonpath_env

# The CLI subprocess imports plugins from this test module itself.
HERE = Path(__file__).resolve().parent

from effectbench.agents.reference import NODE_AGENT
from effectbench.arms.llm import LlmArm, RetryPolicy
from effectbench.core.arm import TaskView
from effectbench.core.exitcodes import ExitCode
from effectbench.core.model import AgentReport
from effectbench.core.provider import EnvHandle
from effectbench.testing import run_cli

NODE = shutil.which("node")
DEAD_URL = "SEALS_DEAD_LLM_URL"
_cli = partial(run_cli, timeout=150)


def dead_llm() -> LlmArm:
    """The llm arm against an endpoint nobody answers (``--arm test_seals:dead_llm``)."""
    return LlmArm(base_url=os.environ[DEAD_URL], model="m", retry=RetryPolicy(max_retries=0))


class Outsider:
    """An in-process arm the harness does not ship (``--arm test_seals:Outsider``)."""

    name = "outsider"

    async def run(self, task: TaskView, env: EnvHandle) -> AgentReport:
        return AgentReport(reported_success=False, halted=True, message="declined")


class Impostor(Outsider):
    """A third-party in-process arm that gives the harness's own version as its own."""

    name = "impostor"
    version = "effectbench==0.1.0"


def _first(run: Path) -> dict[str, Any]:
    line = (run / "events.jsonl").read_bytes().split(b"\n", 1)[0]
    data: dict[str, Any] = orjson.loads(line)["data"]
    return data


@pytest.fixture
def dead_endpoint() -> Iterator[str]:
    """A loopback port that is bound but never listens: every connection is refused, and
    nothing else can take the port while the test holds it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        sock.close()


@pytest.mark.timeout(120)
def test_an_agent_whose_script_is_missing_is_incomplete_everywhere(tmp_path: Path) -> None:
    run = tmp_path / "run"
    spec = f"exec:{sys.executable} {tmp_path / 'no_such_agent.py'}"
    proc = _cli("run", "--arm", spec, "--no-isolate", "--trials", "1", "--out", str(run),
                "--no-report", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == ExitCode.INCOMPLETE, (proc.stdout, proc.stderr)
    (line,) = [ln for ln in proc.stderr.splitlines() if "incomplete: arm" in ln]
    arm = next(iter(orjson.loads((run / "metrics.json").read_bytes())["arms"]))
    assert f"arm {arm!r} scored no episode" in line
    assert "commonest failure (9 of 9): agent:" in line and "no_such_agent.py" in line
    assert "[9/9]" in proc.stderr and "scored 0, failed 9" in proc.stderr  # the progress line
    assert _first(run)["min_coverage"] == 0.9

    check = _cli("verify", str(run), cwd=tmp_path)
    assert check.returncode == ExitCode.INCOMPLETE, check.stdout
    assert "sound" not in check.stdout.lower().replace("not sound", "")
    assert check.stdout.startswith(f"INCOMPLETE: {run}")
    assert f"  - arm {arm!r} scored no episode" in check.stdout
    assert f"  coverage: {arm} 0.0% (0/9 scored)" in check.stdout
    assert f"  NOT contained: {arm}" in check.stdout

    sub = tmp_path / "sub.json"
    refused = _cli("export", str(run), "--system", arm, "--out", str(sub), cwd=tmp_path)
    assert refused.returncode == ExitCode.INCOMPLETE, refused.stderr
    assert "--allow-partial" in refused.stderr and not sub.exists()
    partial_ = _cli("export", str(run), "--system", arm, "--out", str(sub), "--allow-partial",
                    cwd=tmp_path)  # fmt: skip
    assert partial_.returncode == ExitCode.OK, partial_.stderr
    doc = orjson.loads(sub.read_bytes())
    assert doc["coverage"] == {
        "planned": 9, "eligible": 0, "coverage": 0.0, "min_coverage": 0.9, "partial": True
    }  # fmt: skip
    check = _cli("verify", str(sub), cwd=tmp_path)
    assert check.returncode == ExitCode.INCOMPLETE and check.stdout.startswith("INCOMPLETE")
    doc["coverage"]["eligible"] = 9  # a coverage the rows do not give is a reason
    forged = tmp_path / "forged.json"
    forged.write_bytes(orjson.dumps(doc))
    check = _cli("verify", str(forged), cwd=tmp_path)
    assert check.returncode == ExitCode.FAILED and "coverage.eligible" in check.stdout


@pytest.mark.timeout(120)
def test_a_dead_llm_endpoint_exits_incomplete(tmp_path: Path, dead_endpoint: str) -> None:
    env = pythonpath_env(TESTS, HERE, **{DEAD_URL: dead_endpoint})
    proc = _cli("run", "--arm", "test_seals:dead_llm", "--trials", "1", "--task", "*::ok",
                "--out", str(tmp_path / "run"), "-q", "--no-report", cwd=tmp_path,
                env=env)  # fmt: skip
    assert proc.returncode == ExitCode.INCOMPLETE, (proc.stdout, proc.stderr)
    assert "incomplete: arm 'llm' scored no episode; commonest failure (1 of 1): agent:" in (
        proc.stderr
    )


@pytest.mark.timeout(120)
def test_coverage_below_the_threshold_is_incomplete_and_the_threshold_is_recorded(
    tmp_path: Path,
) -> None:
    """every_mode: 6 of 16 episodes score (37.5%)."""
    args = ("run", "--provider", "effectbench.testing:every_mode", "--arm",
            "effectbench.testing:ScriptedArm", "--trials", "2", "-q", "--no-report")  # fmt: skip
    strict, lenient = tmp_path / "strict", tmp_path / "lenient"
    proc = _cli(*args, "--out", str(strict), cwd=tmp_path)
    assert proc.returncode == ExitCode.INCOMPLETE
    assert "arm 'scripted' coverage 37.5% (6/16 scored) is below the minimum 90%" in proc.stderr
    proc = _cli(*args, "--min-coverage", "0.375", "--out", str(lenient), cwd=tmp_path)
    assert proc.returncode == ExitCode.OK, proc.stderr
    assert _first(lenient)["min_coverage"] == 0.375
    manifest = orjson.loads((lenient / "manifest.json").read_bytes())
    assert manifest["min_coverage"] == 0.375
    check = _cli("verify", str(lenient), cwd=tmp_path)  # its own threshold, not the default
    assert check.returncode == ExitCode.OK, check.stdout
    assert check.stdout.splitlines()[:2] == [
        f"sound: {lenient}",
        "  coverage: scripted 37.5% (6/16 scored)",
    ]
    check = _cli("verify", str(strict), cwd=tmp_path)
    assert check.returncode == ExitCode.INCOMPLETE
    assert "minimum coverage 90%" in check.stdout.splitlines()[0]

    # a manifest that lowers the recorded threshold is a reason, and changes nothing
    manifest = orjson.loads((strict / "manifest.json").read_bytes())
    manifest["min_coverage"] = 0.1
    (strict / "manifest.json").write_bytes(orjson.dumps(manifest))
    check = _cli("verify", str(strict), cwd=tmp_path)
    assert check.returncode == ExitCode.FAILED and "min_coverage" in check.stdout


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan"])
def test_min_coverage_out_of_range_is_one_line(tmp_path: Path, value: str) -> None:
    proc = _cli("run", "--min-coverage", value, "--out", str(tmp_path / "x"), cwd=tmp_path)
    assert proc.returncode == ExitCode.USAGE and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "--min-coverage must be a fraction from 0 to 1, got" in line, proc.stderr
    assert not (tmp_path / "x").exists()


@pytest.mark.timeout(150)
def test_an_uncontained_agent_is_sound_not_contained(tmp_path: Path) -> None:
    assert NODE is not None, "node is required (CI installs nodejs)"
    run = tmp_path / "run"
    proc = _cli("run", "--arm", f"exec:node {NODE_AGENT}", "--arm", "effect_verified",
                "--no-isolate", "--trials", "1", "--out", str(run), "-q", "--no-report",
                cwd=tmp_path)  # fmt: skip
    assert proc.returncode == ExitCode.OK, proc.stderr
    check = _cli("verify", str(run), cwd=tmp_path)
    assert check.returncode == ExitCode.NOT_CONTAINED, check.stdout
    # the harness's own in-process baseline is harness code, not an uncontained agent
    assert check.stdout.splitlines()[0] == f"sound, NOT contained: exec:effect_verified ({run})"
    sub = tmp_path / "sub.json"
    made = _cli("export", str(run), "--system", "exec:effect_verified", "--out", str(sub),
                cwd=tmp_path)  # fmt: skip
    assert made.returncode == ExitCode.OK, made.stderr
    check = _cli("verify", str(sub), cwd=tmp_path)
    assert check.returncode == ExitCode.NOT_CONTAINED, check.stdout
    assert check.stdout.startswith("sound, NOT contained: exec:effect_verified")


@pytest.mark.timeout(120)
def test_harness_arms_are_contained_and_a_third_party_in_process_arm_is_not(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    env = pythonpath_env(TESTS, HERE)
    proc = _cli("run", "--arm", "effect_verified", "--arm", "test_seals:Outsider",
                "--trials", "1", "--out", str(run), "-q", "--no-report", cwd=tmp_path,
                env=env)  # fmt: skip
    assert proc.returncode == ExitCode.OK, proc.stderr
    check = _cli("verify", str(run), cwd=tmp_path, env=env)
    assert check.returncode == ExitCode.NOT_CONTAINED, check.stdout
    assert check.stdout.splitlines()[0] == f"sound, NOT contained: outsider ({run})"

    alone = tmp_path / "alone"
    proc = _cli("run", "--arm", "effect_verified", "--trials", "1", "--out", str(alone), "-q",
                "--no-report", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == ExitCode.OK, proc.stderr
    check = _cli("verify", str(alone), cwd=tmp_path)
    assert check.returncode == ExitCode.OK and check.stdout.startswith(f"sound: {alone}")


@pytest.mark.timeout(120)
def test_a_third_party_arm_claiming_the_harness_version_does_not_run(tmp_path: Path) -> None:
    """Harness code is where the arm's class lives, not what it says it is: an outside arm
    whose ``version`` names the effectbench distribution would verify as contained."""
    run = tmp_path / "run"
    env = pythonpath_env(TESTS, HERE)
    proc = _cli("run", "--arm", "test_seals:Impostor", "--trials", "1", "--out", str(run),
                "-q", "--no-report", cwd=tmp_path, env=env)  # fmt: skip
    assert proc.returncode == ExitCode.USAGE, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "arm 'impostor' gives its version as 'effectbench==0.1.0'" in line, line
    assert "(test_seals) is not the harness's" in line
    assert not (run / "events.jsonl").exists()
