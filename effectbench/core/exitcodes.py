"""Every exit status the ``effectbench`` command can end with, in one place.

A script that runs the harness reads these to tell a result from a run that measured
too little, a sound run from a contained one, or a run that lost a component it
depends on. docs/exit-codes.md lists them for users; when two apply, the lowest
listed cause wins in this order: storage, service lost, incomplete.
"""

from __future__ import annotations

import enum

__all__ = ["ExitCode"]


class ExitCode(enum.IntEnum):
    """The ``effectbench`` command's exit statuses."""

    OK = 0
    """The command did what it was asked, and every seal it printed holds."""
    FAILED = 1
    """A check failed (verify: NOT sound; reference: a pinned value differs; a plugin
    failed to load) or an internal error (a bug: rerun with --debug)."""
    USAGE = 2
    """Bad input or a refused command; the one line on stderr says what to do."""
    INCOMPLETE = 3
    """The run measured too little to be a result: an arm scored no episode, or an arm's
    coverage is below ``--min-coverage`` (run), or below the threshold the run recorded
    (verify)."""
    NOT_CONTAINED = 4
    """verify: the run is sound, but at least one arm ran without containment."""
    SERVICE_LOST = 5
    """A component the harness owns (a database server, a product server, Chromium, a
    display, the Dask workers) died during the run; the episodes it took are unscored
    and resumable."""
    STORAGE = 6
    """The harness could not write its own files (disk full, read-only); the run stopped
    at the first such error, and ``--resume`` continues it once space is freed."""
    INTERRUPTED = 130
    """Stopped by Ctrl-C (128 + the signal's number for other signals)."""
