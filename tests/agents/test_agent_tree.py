"""Issue 25, item 7 (the agent's side): without containment too, an agent's whole process
tree dies with its episode or run, and with the harness, a daemon that left the agent's
process group and session included (agents/supervisor.py; real processes, SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from effectbench.agents import ExecArm
from effectbench.run.plan import ProviderInfo, build_plan
from effectbench.run.scheduler import Scheduler, SchedulerOptions
from effectbench.testing import InMemoryProvider, effectbench_command

DAEMON_AGENT = Path(__file__).resolve().parents[1] / "agents" / "daemon_agent.py"
PROVIDER = "effectbench.testing:every_mode"
DEATH_WAIT_S = 30.0
"""The longest a test waits for a process to die (it returns as soon as it has)."""


@contextlib.contextmanager
def _watched(pid: int) -> Iterator[int]:
    """A pidfd of ``pid`` (readable once it has exited); the process is killed on the way
    out, so a failing test leaves nothing behind."""
    fd = os.pidfd_open(pid)
    try:
        yield fd
    finally:
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(fd, signal.SIGKILL)
        os.close(fd)


def _dies(fd: int) -> bool:
    readable, _, _ = select.select([fd], [], [], DEATH_WAIT_S)
    return bool(readable)


def _alive_pid(path: Path) -> int | None:
    """The daemon's pid, or None when it has already gone (nothing to watch)."""
    pid = int(path.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    return pid


@pytest.mark.parametrize("mode", ["per_episode", "shared"])
def test_a_daemon_of_an_uncontained_agent_dies_with_its_episode_or_run(
    tmp_path: Path, mode: str
) -> None:
    """On main the daemon lives on after the run, reparented to init."""
    pid_file = tmp_path / "daemon.pid"
    arm = ExecArm([sys.executable, str(DAEMON_AGENT), str(pid_file), "report"], name="d",
                  mode=mode, isolate=False)  # type: ignore[arg-type]  # fmt: skip
    provider = InMemoryProvider(("ok",))
    plan = build_plan(ProviderInfo("fake", "1.0"), provider.tasks(), [arm.name], 1)
    sched = Scheduler(plan, provider, {arm.name: arm}, tmp_path, run_id="r",
                      options=SchedulerOptions(concurrency=1))  # fmt: skip
    outcome = anyio.run(sched.run)
    assert outcome.finished == 1
    pid = _alive_pid(pid_file)
    if pid is not None:  # it may be a zombie not yet reaped by its reaper: wait for that
        with _watched(pid) as fd:
            assert _dies(fd), f"the agent's daemon {pid} outlived its {mode} agent's run"


@pytest.mark.timeout(120)
def test_a_daemon_of_an_uncontained_agent_dies_with_a_sigkilled_harness(tmp_path: Path) -> None:
    """On main the daemon outlives the SIGKILLed harness and can rewrite the finished run."""
    fifo = tmp_path / "daemon.pid"
    os.mkfifo(fifo)
    agent = f"exec:{sys.executable} {DAEMON_AGENT} {fifo} hang"
    harness = subprocess.Popen(
        [*effectbench_command(), "run", "--arm", agent, "--provider", PROVIDER, "--task",
         "fake::ok", "--trials", "1", "--no-isolate", "--episode-timeout", "300", "--out",
         str(tmp_path / "run"), "-q"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        with fifo.open() as f:  # blocks until the daemon writes: the barrier
            pid = int(f.read())
        with _watched(pid) as fd:
            harness.send_signal(signal.SIGKILL)
            harness.wait()
            assert _dies(fd), f"the agent's daemon {pid} outlived the SIGKILLed harness"
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
