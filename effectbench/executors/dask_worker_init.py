"""Preloaded into every worker process of a ``dask-local:N`` cluster the harness starts.

A Ctrl-C at the terminal reaches the whole foreground process group, so without this
each local worker would die of KeyboardInterrupt and print a traceback over the
harness's one-line "interrupted" message. The harness owns the workers: it closes the
cluster when it stops, so the workers ignore SIGINT. Workers of a user's own
``dask://`` cluster are not touched.
"""

from __future__ import annotations

import signal
from typing import Any

MODULE = __name__
"""The name LocalCluster's ``preload`` is given (a module name, imported in the worker)."""


def dask_setup(worker: Any) -> None:
    """Called by Dask in the worker's main thread as the worker starts."""
    del worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
