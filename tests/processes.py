"""Test helpers shared by several test modules (moved from test_browser_lifecycle.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

DEADLINE_S = 30.0


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time) of a live process, None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], int(fields[19])


def _alive(pid: int, started: int) -> bool:
    st = _stat(pid)
    return st is not None and st[2] == started and st[1] != "Z"


def _descendants(root: int) -> dict[int, int]:
    """Every process below ``root``: pid -> start time (so a reused pid is not mistaken)."""
    table: dict[int, tuple[int, str, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(int(entry))) is not None:
            table[int(entry)] = st
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, _, started) in table.items():
            if ppid == parent and pid not in found:
                found[pid] = started
                frontier.append(pid)
    return found


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _wait_until_gone(procs: dict[int, int]) -> list[int]:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        left = [pid for pid, started in procs.items() if _alive(pid, started)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid, started in procs.items() if _alive(pid, started)]


def sigkill_survivors(proc: subprocess.Popen[Any], tree: dict[int, int]) -> list[int]:
    """SIGKILL ``proc`` and wait for it; which of ``tree`` are still alive by the deadline."""
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return _wait_until_gone(tree)
