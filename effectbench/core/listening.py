"""What Linux's ``/proc`` says of processes: which listen on which TCP ports, which
descend from which, and which are dying.

A product that binds a port number picked free a moment earlier can lose it to another
server; its readiness probe would then be answered by that other server, and the
episode would write into someone else's product. ``listening_ports`` lets the harness
check that the answering socket belongs to the process it started (or a child of it),
and lets the provider contract check that nothing is left listening after teardown.
``dying`` tells a SIGKILLed product apart from a live one in the moment between its
sockets closing and its exit being reported.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterable
from pathlib import Path

__all__ = ["descendants", "dying", "listening_ports", "read_proc"]

_LISTEN = "0A"
"""The LISTEN state in ``/proc/net/tcp``."""
_PF_EXITING = 0x4
"""The kernel's flag on a task that has begun to exit (``/proc/PID/stat``, field 9)."""
_SIGKILL_BIT = 1 << (signal.SIGKILL - 1)
_LINUX = sys.platform.startswith("linux")


def listening_ports(pids: Iterable[int]) -> frozenset[int]:
    """The TCP ports (IPv4 or IPv6) that any of ``pids`` has a listening socket on."""
    inodes: set[str] = set()
    for pid in pids:
        for fd in _listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in (read_proc(table) or "").splitlines()[1:]:
            cols = line.split()
            if len(cols) > 9 and cols[3] == _LISTEN and cols[9] in inodes:
                found.add(int(cols[1].rsplit(":", 1)[1], 16))
    return frozenset(found)


def descendants(root: int) -> frozenset[int]:
    """Every live (not zombie) process below ``root``, ``root`` itself left out."""
    parents: dict[int, int] = {}
    for entry in _listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat_fields(int(entry))
        if len(fields) > 1 and fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return frozenset(found)


def dying(pid: int) -> bool:
    """Whether ``pid`` is dead or past saving: a zombie, exiting, or with SIGKILL pending.

    A SIGKILLed server closes its sockets before it becomes a zombie, so a client can be
    refused while ``waitid`` still reports the process running; this tells that window
    apart from a live process (elsewhere than Linux, always False)."""
    fields = _stat_fields(pid)
    status = read_proc(f"/proc/{pid}/status")
    if not fields or status is None:  # on Linux: no such process any more
        return _LINUX
    if len(fields) > 6 and (fields[0] in ("Z", "X") or int(fields[6]) & _PF_EXITING):
        return True
    for line in status.splitlines():
        name, _, value = line.partition(":")
        if name in ("SigPnd", "ShdPnd") and int(value.strip(), 16) & _SIGKILL_BIT:
            return True
    return False


def _stat_fields(pid: int) -> list[str]:
    """``/proc/PID/stat`` from its state on (field 3), or [] when unreadable: the command
    name before it may hold spaces and parentheses, so it is cut at the last ``)``."""
    stat = read_proc(f"/proc/{pid}/stat")
    return stat.rsplit(")", 1)[-1].split() if stat else []


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def read_proc(path: str) -> str | None:
    """A ``/proc`` file's text, or None when it cannot be read (the process is gone)."""
    try:
        return Path(path).read_text()
    except OSError:
        return None
