"""Which processes listen on which TCP ports, read from Linux's ``/proc``.

A product that binds a port number picked free a moment earlier can lose it to another
server; its readiness probe would then be answered by that other server, and the
episode would write into someone else's product. ``listening_ports`` lets the harness
check that the answering socket belongs to the process it started (or a child of it),
and lets the provider contract check that nothing is left listening after teardown.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

__all__ = ["descendants", "listening_ports"]

_LISTEN = "0A"
"""The LISTEN state in ``/proc/net/tcp``."""


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
        for line in (_read_text(table) or "").splitlines()[1:]:
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
        stat = _read_text(f"/proc/{entry}/stat")
        fields = stat.rsplit(")", 1)[-1].split() if stat else []
        if len(fields) > 1 and fields[0] != "Z":
            parents[int(entry)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return frozenset(found)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def _read_text(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None
