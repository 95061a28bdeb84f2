"""The run lock as a reader takes it: a shared, non-blocking flock on the log.

Apart from the scheduler (which takes it exclusive for a whole run) so that a rescore,
which only reads, does not import the scheduler and everything it runs on."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["run_lock_held", "share_run_lock"]


@contextmanager
def share_run_lock(log_path: Path) -> Iterator[bool]:
    """Take the run lock (the scheduler's exclusive flock on the log) shared, without waiting, for
    as long as the block runs: a reader of the log, such as a rescore.

    Yields False, holding nothing, while a run or resume holds it; otherwise True, and
    until the block ends no run or resume can start on this log (they refuse). A log
    that cannot be opened yields True: no run holds it, and the reader reports why."""
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except OSError:
        fd = -1
    try:
        free = True
        if fd >= 0:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                free = False
        yield free
    finally:
        if fd >= 0:
            os.close(fd)


def run_lock_held(log_path: Path) -> bool:
    """Whether a run or resume holds the log's lock right now (a non-blocking probe)."""
    with share_run_lock(log_path) as free:
        return not free
