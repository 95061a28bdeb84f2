"""Issue 25, item 2 (the agent's side): a failing agent's whole stderr tail is in its
failure reason and once on the console, and an arm whose process fails to start the same
way three times in a row is not started again (real subprocesses, the real CLI)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from effectbench.agents import ExecArm
from effectbench.agents.channel import Channel
from effectbench.agents.starts import START_FAILURE_LIMIT, StartWatch
from effectbench.core.exitcodes import ExitCode
from effectbench.core.rundir import RunDir
from effectbench.log.reader import read_log
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.testing import InMemoryProvider, run_cli

SCRIPTED = Path(__file__).resolve().parents[1] / "agents" / "scripted_agent.py"
NODE = shutil.which("node")
MOST_STARTS = 2 * START_FAILURE_LIMIT - 1
"""At most this many unproven starts at once, so the third failure comes before the sixth start."""
MISSING_MODULE = "const x = require('no-such-module-effectbench');\n"


def _run(tmp_path: Path, arm: ExecArm, behaviours: tuple[str, ...], concurrency: int) -> list[Any]:
    provider = InMemoryProvider(behaviours)
    plan = build_plan(ProviderInfo("fake", "1.0"), provider.tasks(), [arm.name], 1)
    options = SchedulerOptions(concurrency=concurrency)
    sched = Scheduler(plan, provider, {arm.name: arm}, tmp_path, run_id="r", options=options)
    anyio.run(sched.run)
    return list(read_log(tmp_path / "events.jsonl"))


def _errors(events: list[Any]) -> dict[str, str]:
    return {e.ep.split("::")[-2]: e.data["error"] for e in events if e.type == "episode.failed"}


def test_a_missing_node_module_is_named_in_the_failure_not_only_the_node_version(
    tmp_path: Path,
) -> None:
    """On main the reason ends in "(stderr: Node.js v20...)" and nothing else."""
    assert NODE is not None, "node is required (CI installs nodejs)"
    script = tmp_path / "agent.js"
    script.write_text(MISSING_MODULE)
    arm = ExecArm([NODE, str(script)], name="node", mode="per_episode", isolate=False)
    (why,) = _errors(_run(tmp_path, arm, ("ok",), concurrency=1)).values()
    assert why.startswith("arm 'node' raised AgentExited: the agent process exited with code 1")
    assert "Error: Cannot find module 'no-such-module-effectbench'" in why
    assert "Require stack:" in why and "Node.js v" in why


@pytest.mark.timeout(120)
def test_the_stderr_tail_is_on_the_console_once_and_a_broken_arm_stops_after_three_starts(
    tmp_path: Path,
) -> None:
    """On main: 90 dead starts, and the console says nothing of why."""
    assert NODE is not None, "node is required (CI installs nodejs)"
    script = tmp_path / "agent.js"
    script.write_text(MISSING_MODULE)
    out = tmp_path / "run"
    proc = run_cli("run", "--arm", f"exec-each:{NODE} {script}", "--trials", "10",
                   "--no-isolate", "--no-report", "--out", str(out), cwd=tmp_path)  # fmt: skip
    assert proc.returncode in (ExitCode.OK, ExitCode.INCOMPLETE), proc.stderr
    (shown,) = [ln for ln in proc.stderr.splitlines() if "agent.stderr" in ln]  # once, not 90x
    assert "Cannot find module 'no-such-module-effectbench'" in shown and "Node.js v" in shown
    assert proc.stderr.count("agent.stopped") == 1 and "starts=3" in proc.stderr
    errors = [e.data["error"] for e in read_log(RunDir(out).log) if e.type == "episode.failed"]
    started = [e for e in errors if "AgentExited" in e]
    assert len(errors) == 90 and START_FAILURE_LIMIT <= len(started) <= MOST_STARTS
    assert all("Cannot find module" in e for e in errors)


@pytest.mark.parametrize("mode", ["per_episode", "shared"])
def test_a_missing_script_is_started_three_times_then_the_arm_says_why_it_stopped(
    tmp_path: Path, mode: str
) -> None:
    missing = tmp_path / "no_such_agent.py"
    arm = ExecArm([sys.executable, str(missing)], name="a", mode=mode, isolate=False)  # type: ignore[arg-type]
    behaviours = tuple(f"report{i}" for i in range(40))
    errors = _errors(_run(tmp_path, arm, behaviours, concurrency=8))
    assert len(errors) == 40 and START_FAILURE_LIMIT <= arm.processes_started <= MOST_STARTS
    assert arm.starts.stopped is not None and "can't open file" in arm.starts.stopped
    stopped = [e for e in errors.values() if "AgentStartFailed: not started" in e]
    per_start = 1 if mode == "per_episode" else 8  # the episodes one process takes down
    assert len(stopped) >= 40 - per_start * arm.processes_started > 0
    assert all("No such file or directory" in e for e in errors.values())


def test_a_program_that_cannot_be_executed_stops_after_three_tries_too(tmp_path: Path) -> None:
    arm = ExecArm([str(tmp_path / "nothing")], name="a", mode="per_episode", isolate=False)
    errors = _errors(_run(tmp_path, arm, tuple(f"r{i}" for i in range(5)), concurrency=1))
    assert len(errors) == 5 and arm.processes_started == 0
    assert sum("not started: the last 3 starts" in e for e in errors.values()) == 2


def test_failures_after_a_process_that_spoke_restart_the_count(tmp_path: Path) -> None:
    """Two silent crashes, a working process, two more: never three in a row, never stopped."""
    order = ("report", "crash1", "crash2", "report2", "crash3", "crash4", "report3")
    arm = ExecArm([sys.executable, str(SCRIPTED)], name="a", mode="per_episode", isolate=False)
    errors = _errors(_run(tmp_path, arm, order, concurrency=1))
    assert sorted(errors) == ["crash1", "crash2", "crash3", "crash4"]
    assert arm.starts.stopped is None and arm.processes_started == len(order)


@pytest.mark.anyio
async def test_a_process_that_dies_before_it_is_sent_an_episode_counts_as_a_failed_start() -> None:
    """A shared process can end before the scheduler hands it its first episode (a
    loaded machine): that death is a failed start too, or an unstartable arm starts a
    process for every episode that finds the last one gone (CI saw 6 starts where the
    limit allows 5)."""
    watch = StartWatch()
    for n in (1, 2):
        proc = await anyio.open_process(
            [sys.executable, "-c", "import sys; sys.stderr.write('no such module'); sys.exit(2)"]
        )
        channel = Channel(proc, "a", None, watch)
        async with anyio.create_task_group() as tg:
            tg.start_soon(channel.pump_stderr)
            await channel.pump_stdout()  # ends when the process does: nothing was pending
        await proc.aclose()
        assert (watch.count, watch.reason) == (n, channel_reason(2))
    # one the harness ended is no failed start, however it exits
    proc = await anyio.open_process([sys.executable, "-c", "import sys; sys.exit(3)"])
    channel = Channel(proc, "a", None, watch)
    channel.killed = True
    await channel.pump_stdout()
    await proc.aclose()
    assert watch.count == 2 and watch.stopped is None


def channel_reason(code: int) -> str:
    return f"the agent process exited with code {code} before it reported (stderr: no such module)"
