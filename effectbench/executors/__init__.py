"""Where a run's episodes execute: here (``local``) or on a Dask cluster (``dask``).

The scheduler stays the one writer of the log either way; an executor only decides
where each whole episode runs and hands its events back to be written. ``parse`` turns
the ``--executor`` value into one (``local`` is the scheduler's own in-process path).
"""

from __future__ import annotations

from effectbench.executors.base import INSTALL_HINT, EpisodeSink, Executor, ExecutorError


def parse(text: str) -> Executor:
    """``local``, ``dask://HOST:PORT`` or ``dask-local:N``."""
    value = text.strip()
    if value == "local":
        from effectbench.executors.local import LocalExecutor

        return LocalExecutor()
    if value.startswith(("dask://", "dask-local:")):
        from effectbench.executors.dask import DaskExecutor

        return DaskExecutor.parse(value)
    raise ExecutorError(f"--executor must be local, dask://HOST:PORT or dask-local:N, got {text!r}")


__all__ = ["INSTALL_HINT", "EpisodeSink", "Executor", "ExecutorError", "parse"]
