"""A plan of millions of episodes: planned lazily, so memory stays flat and Ctrl-C during
setup stops the run at once (a real `effectbench run` subprocess, signalled)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from effectbench.log.reader import read_log, verify_log
from effectbench.run.plan import ProviderInfo, build_plan, count_planned, episode_id, episodes
from effectbench.testing import InMemoryProvider, effectbench_command

PROMPT_S = 20
"""CPU seconds the run may spend after Ctrl-C, a generous bound: the materialising
planner took ~77 s to honour it on 9M episodes. CPU, not wall-clock, time: on 2 cores
shared with a loaded machine a niced run got far less than 20 s of CPU in 20 s."""
MAX_HWM_KB = 300 * 1024
"""Listing 1.8M episodes up front peaked near 1.4 GB (~785 bytes each); lazily, ~60 MB."""


def _start(out: Path, trials: int, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*effectbench_command(), "run", "--trials", str(trials), "--out", str(out), "-q", *extra],
        cwd=out.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for(proc: subprocess.Popen[str], log: Path, min_lines: int) -> None:
    """Poll (bounded) until the log exists and holds ``min_lines`` lines."""
    deadline = time.monotonic() + 60
    while not log.exists() or log.read_bytes().count(b"\n") < min_lines:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run made no progress"
        time.sleep(0.001)


def _cpu_s(pid: int) -> float:
    """CPU time (user + system) the process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGINT, then poll until it exits; a run that spends more than PROMPT_S of CPU
    after the signal without stopping is killed and fails (pytest-timeout bounds a hang)."""
    before = _cpu_s(proc.pid)
    proc.send_signal(signal.SIGINT)
    while True:
        try:
            return proc.communicate(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
        if _cpu_s(proc.pid) - before > PROMPT_S:
            proc.kill()
            proc.communicate()
            pytest.fail(f"Ctrl-C was not honoured within {PROMPT_S} CPU seconds")


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM in /proc/<pid>/status")


@pytest.mark.timeout(300)  # a hang guard only: promptness is measured in CPU time
def test_ctrl_c_during_setup_of_a_huge_plan_exits_promptly_with_130(tmp_path: Path) -> None:
    out = tmp_path / "huge"
    proc = _start(out, 500_000)  # 9M episodes, under the cap
    _wait_for(proc, out / "events.jsonl", 0)  # the run holds its log: setup is under way
    _, stderr = _stop(proc)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    events = list(read_log(out / "events.jsonl"))
    if events:  # the signal may land after run.started: then the log is closed cleanly
        assert verify_log(out / "events.jsonl").ok
        assert events[-1].type == "run.finished" and events[-1].data["interrupted"] is True


@pytest.mark.timeout(300)  # a hang guard only: promptness is measured in CPU time
def test_a_huge_plan_runs_its_first_episodes_in_flat_memory(tmp_path: Path) -> None:
    out = tmp_path / "huge"
    proc = _start(out, 100_000, "--concurrency", "4")  # 1.8M episodes
    _wait_for(proc, out / "events.jsonl", 200)  # run.started and the first episodes' events
    peak = _peak_rss_kb(proc.pid)
    _, stderr = _stop(proc)
    assert proc.returncode == 130, stderr
    assert peak < MAX_HWM_KB, f"peak RSS {peak} kB before the first episodes ended"
    last = list(read_log(out / "events.jsonl"))[-1]
    assert last.type == "run.finished" and last.data["interrupted"] is True


def test_count_planned_recognises_exactly_the_plans_episode_ids() -> None:
    provider = InMemoryProvider(("ok", "phantom"))
    plan = build_plan(ProviderInfo("fake", "1.0"), provider.tasks(), ["a", "a::b"], 3)
    ids = [s.episode_id for s in episodes(plan)]
    assert count_planned(plan, ids) == len(ids) == plan.n_episodes == 12
    foreign = [
        episode_id("a", "fake::ok", 3),  # trial out of range
        "a::fake::ok::t01",  # not how trial 1 is spelled
        "a::fake::ok::t-1",
        episode_id("c", "fake::ok", 0),  # not an arm of the plan
        episode_id("a", "fake::nope", 0),
        "a::b::fake::nope::t0",
        "fake::ok::t0",
        "",
    ]
    assert count_planned(plan, foreign) == 0
