"""``dying(pid)``: a process the harness may no longer count on (a zombie, exiting, or
with SIGKILL pending) against a live one; real processes, no sleeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from effectbench.core.listening import dying


def test_a_live_process_is_not_dying_and_a_killed_one_is_before_and_after_its_reaping() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    try:
        assert not dying(proc.pid)
        assert not dying(os.getpid())
        os.kill(proc.pid, signal.SIGKILL)
        # blocks until it is a zombie, and leaves it one: waitid still could say "running"
        # a moment before this (its sockets already closed), which dying() covers too
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        assert dying(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert dying(proc.pid)  # reaped: no such process


def test_a_stopped_process_with_sigkill_pending_is_dying() -> None:
    """A stopped process still dies of SIGKILL at once; a process blocked in the kernel
    may hold it pending. Both read as dying once the signal is sent, never before."""
    proc = subprocess.Popen([sys.executable, "-c", "import signal; signal.pause()"])
    try:
        os.kill(proc.pid, signal.SIGSTOP)
        os.waitid(os.P_PID, proc.pid, os.WSTOPPED | os.WNOWAIT)
        assert not dying(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        assert dying(proc.pid)  # pending, exiting or a zombie: whichever it is by now
    finally:
        proc.kill()
        proc.wait()
