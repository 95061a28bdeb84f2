"""Run a command as the root of its own process tree and report what of it outlives it.

``python reaper.py DEADLINE_S CMD...``: this process becomes a child subreaper
(PR_SET_CHILD_SUBREAPER), so every process the command starts, and every process those
start, is reparented here (never to init) when its parent dies, however it detached
(a new session, a double fork). It prints the command's pid, waits for the command,
prints ``status <returncode>`` when it ends (negative: the signal that killed it), then
reaps every descendant until none is left. If some are still alive DEADLINE_S after the
command ended, it prints ``survivor <pid> <cmdline>`` for each, kills them and exits 1;
otherwise it prints ``clean`` and exits 0.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


def _children() -> list[int]:
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            found.append(int(entry))
    return found


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:300]
    except OSError:
        return "?"


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split("(", 1)[1].rsplit(")", 1)[0]
    except (OSError, IndexError):
        return "?"


def _reap() -> bool:
    """Reap what has exited, printing ``reaped <name> <returncode>`` for each (negative:
    the signal that ended it); True when no child is left at all."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return True
        if info is None:
            return False
        name = _comm(info.si_pid)  # still readable: the child is not reaped yet
        _, status = os.waitpid(info.si_pid, 0)
        print(f"reaped {name} {os.waitstatus_to_exitcode(status)}", flush=True)


def main() -> int:
    deadline_s = float(sys.argv[1])
    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print("error cannot become a subreaper", flush=True)
        return 2
    proc = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL)
    print(proc.pid, flush=True)
    print(f"status {proc.wait()}", flush=True)
    end = time.monotonic() + deadline_s
    while not _reap():
        if time.monotonic() > end:
            while not _reap():
                for pid in _children():
                    print(f"survivor {pid} {_cmdline(pid)}", flush=True)
                    os.kill(pid, signal.SIGKILL)
                time.sleep(0.02)
            return 1
        time.sleep(0.02)  # a helper's poll of the kernel's process table, not a test's sleep
    print("clean", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
