"""Where a provider keeps a run's files: the one rule every first-party provider shares.

A provider's run files (a template database, a pristine tracker, every episode's copy)
go, in this order of precedence:

1. in the directory the provider was constructed with (``RunRoot(name, pinned)``: a
   test's ``tmp_path``, say), which the harness then leaves alone;
2. in the per-run state root the harness hands over (``use_state_dir``), which the next
   run or ``--resume`` of a run killed with SIGKILL empties (``effectbench.run.statedir``);
3. in the state base: ``$EFFECTBENCH_STATE_DIR``, else /dev/shm when writable (episode
   files are created and deleted at hundreds per second; tmpfs makes a SQLite file and
   its WAL ~5x cheaper than ext4 here), else the system temp dir. The harness's own
   state root lives under the same base.

Each start of the provider gets a fresh directory: ``<name>-XXXX`` inside the harness's
root, ``effectbench-<name>-XXXX`` anywhere shared. MockMed, Roundup, the example provider
and the scaffold's template use ``RunRoot``; docs/writing-a-provider.md shows how.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Final

from effectbench.core.relocated import REMOVED_IN

__all__ = ["STATE_DIR_ENV", "RunRoot", "scratch_base", "state_base"]

STATE_DIR_ENV: Final = "EFFECTBENCH_STATE_DIR"


def scratch_base() -> Path:
    """/dev/shm when writable, else the system temp dir: the state base when
    ``$EFFECTBENCH_STATE_DIR`` is not set (and the embedded PostgreSQL server's default)."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK | os.X_OK):
        return shm
    return Path(tempfile.gettempdir())


def state_base() -> Path:
    """``$EFFECTBENCH_STATE_DIR``, else /dev/shm when writable, else the system temp dir."""
    configured = os.environ.get(STATE_DIR_ENV)
    return Path(configured) if configured else scratch_base()


def _old_variable(name: str) -> Path | None:
    """A provider's own variable from before the one rule: it still pins the place, and
    says what replaces it."""
    value = os.environ.get(name)
    if not value:
        return None
    warnings.warn(
        f"${name} is deprecated (removed in effectbench {REMOVED_IN}): set "
        f"${STATE_DIR_ENV} instead (docs/deprecations.md)",
        DeprecationWarning,
        stacklevel=3,
    )
    return Path(value)


class RunRoot:
    """Where one provider keeps a run's files (the module's rule). ``old_env`` names the
    provider's variable from before the rule, honoured as a pinned directory, with a
    DeprecationWarning."""

    def __init__(self, name: str, pinned: Path | None = None, *, old_env: str = "") -> None:
        self._name = name
        self._pinned = pinned if pinned is not None else _old_variable(old_env) if old_env else None
        self._state_dir: Path | None = None

    def use_state_dir(self, path: Path) -> None:
        """The harness's per-run root; ignored when the provider was given a directory."""
        if self._pinned is None:
            self._state_dir = path

    def make(self) -> Path:
        """A new directory for one start of the provider (the caller removes it in stop)."""
        if self._state_dir is not None:
            return Path(tempfile.mkdtemp(prefix=f"{self._name}-", dir=self._state_dir))
        where = self._pinned if self._pinned is not None else state_base()
        return Path(tempfile.mkdtemp(prefix=f"effectbench-{self._name}-", dir=where))
