"""The run lock: an advisory flock on a run's log, taken without waiting.

A run or resume holds it exclusive for the whole run (the scheduler), ``--force``
exclusive while it deletes (run/outdir.py), and a reader of the log, such as a rescore,
shared. Every one of them takes it through :func:`log_lock`, so the three agree on what
the lock is; this module imports nothing of the scheduler, so a rescore does not load
the scheduler and everything it runs on."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

__all__ = ["LogLock", "log_lock", "run_lock_held", "share_run_lock"]


@attrs.frozen
class LogLock:
    """What :func:`log_lock` got: the open descriptor (-1 when the log could not be
    opened, with ``error`` saying why) and whether the lock is held."""

    fd: int
    held: bool
    error: OSError | None = None


@contextmanager
def log_lock(log_path: Path, *, exclusive: bool, flags: int = os.O_RDONLY) -> Iterator[LogLock]:
    """Open the log with ``flags`` and take its lock (exclusive or shared) without
    waiting, for as long as the block runs; the descriptor is closed at its end, which
    releases the lock. Another process's conflicting lock yields ``held`` False; the
    caller decides what a busy or unopenable log means to it."""
    unopened: OSError | None = None
    try:
        fd = os.open(log_path, flags, 0o644)
    except OSError as exc:
        unopened = exc
    if unopened is not None:  # yielded outside the handler: the block's errors chain to nothing
        yield LogLock(-1, False, unopened)
        return
    try:
        yield LogLock(fd, _flock(fd, exclusive))
    finally:
        os.close(fd)


def _flock(fd: int, exclusive: bool) -> bool:
    """Take the lock without waiting; False when another process holds a conflicting one."""
    try:
        fcntl.flock(fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@contextmanager
def share_run_lock(log_path: Path) -> Iterator[bool]:
    """Take the run lock shared, without waiting, for as long as the block runs: a
    reader of the log, such as a rescore.

    Yields False, holding nothing, while a run or resume holds it; otherwise True, and
    until the block ends no run or resume can start on this log (they refuse). A log
    that cannot be opened yields True: no run holds it, and the reader reports why."""
    with log_lock(log_path, exclusive=False) as lock:
        yield lock.held or lock.error is not None


def run_lock_held(log_path: Path) -> bool:
    """Whether a run or resume holds the log's lock right now (a non-blocking probe)."""
    with share_run_lock(log_path) as free:
        return not free
