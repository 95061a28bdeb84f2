"""The one place a provider keeps per-episode state: a per-run temp root.

A provider that defines ``use_state_dir(path)`` is handed ``<base>/effectbench-state-<run
id>-<dir>/`` before ``start()`` (``<dir>``: a hash of the run directory's absolute path, so
two runs of one plan started in the same second, whose run ids are equal, never share it): it puts
its episode files (databases, uploads) there. The root is emptied before the provider starts and
removed after it stops, so whatever a run killed with SIGKILL left behind is deleted by the next
``run --resume`` of that run (the run id and the directory are kept across resumes), while the
run's lock on its log is held. The harness claims the root for every run (``claimed``), and its
own parts keep their files there too: the browsers' profiles, the Dask workers' scratch space
and the providers the workers build. ``<base>`` is ``$EFFECTBENCH_STATE_DIR``, else /dev/shm when
writable (episode files are created at hundreds per second), else the system temp dir: the
state base of ``effectbench.core.statedir``, whose ``RunRoot`` is how a provider uses the root.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

from effectbench.core.statedir import STATE_DIR_ENV, state_base

__all__ = [
    "STATE_DIR_ENV",
    "claimed",
    "fresh_state_root",
    "remove_state_root",
    "state_base",
    "state_root",
]


def state_root(run_id: str, run_dir: Path) -> Path:
    """The run's per-episode state root (the run id made safe as a file name, and its
    directory's hash)."""
    where = hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    return state_base() / f"effectbench-state-{safe}-{where}"


def fresh_state_root(run_id: str, run_dir: Path) -> Path:
    """The run's state root, emptied of anything an earlier (killed) session left."""
    root = state_root(run_id, run_dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    return root


def remove_state_root(run_id: str, run_dir: Path) -> None:
    shutil.rmtree(state_root(run_id, run_dir), ignore_errors=True)


@contextlib.contextmanager
def claimed(run_id: str, run_dir: Path) -> Iterator[Path]:
    """The run's state root for the block: emptied first (what a killed session left),
    removed after. Every part of a session keeps its files under it: the provider's
    (``use_state_dir``), the browsers' profiles, the Dask workers' scratch space."""
    root = fresh_state_root(run_id, run_dir)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)
